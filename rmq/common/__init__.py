"""What every layer shares (RocketMQ's ``common`` module): the message codec and task owners.

The bottom layer, beside :mod:`rmq.errors`: it imports nothing else from rmq, so store,
remoting, broker, namesrv, client and spark may all use it.
"""
