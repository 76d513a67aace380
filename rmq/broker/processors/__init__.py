"""The broker's request processors, one module per family of request codes.

``send`` (10, 310, 320), ``pull`` (11, synchronous), ``client_manage`` (34, 35 and the
consumer-manage codes 14, 15, 38), ``admin`` (topics, groups, stats, offset lookups).
``BrokerController._register_processors`` maps each code to its processor and pool.
"""
