"""rmq.protocol: RocketMQ's remoting vocabulary, without I/O (Java ``common/protocol`` plus
``remoting/protocol``'s ``RemotingCommand``).

* :mod:`rmq.protocol.codes`: RequestCode, ResponseCode, LanguageCode, SerializeType;
* :mod:`rmq.protocol.command`: RemotingCommand, the one in-memory command;
* :mod:`rmq.protocol.headers`: the typed-header machinery, and one module of header classes per
  area (``headers.topic``, ``headers.message``, …);
* :mod:`rmq.protocol.requests`: request builders and reply parsers, one module per area;
* :mod:`rmq.protocol.body`: the admin wire bodies, one module per area.

It sits below the transport (``rmq.remoting``: frames, connections, server, clients), which
needs the codes and the command, and below the client, broker and name server, which speak
it. Nothing here opens a socket or imports ``rmq.remoting``.
"""
