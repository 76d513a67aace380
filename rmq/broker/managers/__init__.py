"""The broker's tables: topics, subscription groups and consumer offsets (persisted with
msgpack, atomically), consumers and producers (in memory, from heartbeats)."""
