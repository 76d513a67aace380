"""The rmq exception tree.

Every exception says whether retrying can help (``retriable``) and, for broker
answers, whether the caller should refresh its topic route first
(``refresh_route``). Normal outcomes (a pull that found nothing, a send that
timed out flushing to disk) are status enums on results, not exceptions.

::

    RMQError
     ├── RemotingError                  transport and framing (rmq.remoting)
     │    ├── RemotingConnectError      could not connect / connection dropped   retriable
     │    ├── RemotingTimeoutError      no response in time                      retriable
     │    ├── RemotingSendRequestError  the write failed                         retriable
     │    ├── RemotingTooMuchRequestError  in-flight semaphore exhausted         retriable
     │    └── RemotingCommandError      malformed frame / header / field         not retriable
     ├── BrokerResponseError(code, remark)   a non-success answer; see for_code()
     ├── RouteError                     no route for a topic, or a broker missing from it  retriable
     ├── ClientError                    misuse of the SDK (IllegalStateError, …)
     │    └── ConfigError               a bad constructor argument (also a ValueError)
     └── StoreError                     the message store failed
"""

from __future__ import annotations

__all__ = [
    "RMQError",
    "RemotingError",
    "RemotingConnectError",
    "RemotingTimeoutError",
    "RemotingSendRequestError",
    "RemotingTooMuchRequestError",
    "RemotingCommandError",
    "BrokerResponseError",
    "BrokerSystemError",
    "SystemBusyError",
    "RequestCodeNotSupportedError",
    "TransactionFailedError",
    "FlushDiskTimeoutError",
    "SlaveNotAvailableError",
    "FlushSlaveTimeoutError",
    "MessageIllegalError",
    "ServiceNotAvailableError",
    "VersionNotSupportedError",
    "NoPermissionError",
    "TopicNotExistError",
    "TopicExistAlreadyError",
    "PullNotFoundError",
    "PullRetryImmediatelyError",
    "PullOffsetMovedError",
    "QueryNotFoundError",
    "SubscriptionParseFailedError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionGroupNotExistError",
    "FilterDataNotExistError",
    "FilterDataNotLatestError",
    "NoBuyerIdError",
    "NotInCurrentUnitError",
    "ConsumerNotOnlineError",
    "ConsumeMsgTimeoutError",
    "NoMessageError",
    "FlowControlError",
    "for_code",
    "RouteError",
    "ClientError",
    "IllegalStateError",
    "ConfigError",
    "StoreError",
]


class RMQError(Exception):
    """Root of every rmq exception.

    Attributes:
        retriable: True when the same call may succeed if simply tried again
            (possibly against another broker). Class attribute, default False.
    """

    retriable: bool = False


# --------------------------------------------------------------------------- remoting
# Mirrors RocketMQ remoting/exception/*.


class RemotingError(RMQError):
    """A transport-level failure talking to a peer."""


class RemotingConnectError(RemotingError):
    """Could not connect to ``addr``, or the connection dropped while a call waited.

    When the connection dropped, ``__cause__`` is the transport's error (if it
    gave one).
    """

    retriable = True

    def __init__(self, addr: str, message: str | None = None) -> None:
        self.addr = addr
        super().__init__(message or f"connect to {addr} failed")


class RemotingTimeoutError(RemotingError):
    """No response arrived within the call's timeout."""

    retriable = True

    def __init__(self, addr: str, timeout: float | None, message: str | None = None) -> None:
        self.addr = addr
        self.timeout = timeout
        super().__init__(message or f"wait response on {addr} timed out after {timeout}s")


class RemotingSendRequestError(RemotingError):
    """Writing the request to the connection failed (it was closed or closing)."""

    retriable = True

    def __init__(self, addr: str, message: str | None = None) -> None:
        self.addr = addr
        super().__init__(message or f"send request to {addr} failed")


class RemotingTooMuchRequestError(RemotingError):
    """Too many async or oneway calls in flight (the client's semaphore is exhausted)."""

    retriable = True


class RemotingCommandError(RemotingError):
    """A frame, header or header field is malformed. Retrying the same bytes cannot help.

    The message names what was wrong (the field, the length, the type).
    """

    retriable = False


# --------------------------------------------------------------------------- broker answers

_REGISTRY: dict[int, type[BrokerResponseError]] = {}


class BrokerResponseError(RMQError):
    """A broker or name server answered with a non-success ``ResponseCode``.

    Subclasses declare ``code`` (unique; duplicates are refused at class
    creation) and their ``retriable`` / ``refresh_route`` policy. Build one from
    a response with ``for_code(code)(code, remark)``.

    Attributes:
        code: the response code (int).
        remark: the peer's remark, or None.
        retriable: the producer retries another queue / broker (Java's
            ``retryResponseCodes``: 17, 14, 1, 16, 204, 205, plus SYSTEM_BUSY).
        refresh_route: the caller should refresh its topic route before retrying.
    """

    code: int = -1
    retriable = False
    refresh_route: bool = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return
        if code in _REGISTRY:
            raise TypeError(f"response code {code} already mapped to {_REGISTRY[code].__name__}")
        _REGISTRY[code] = cls

    def __init__(self, code: int | None = None, remark: str | None = None) -> None:
        if code is not None:
            self.code = int(code)
        self.remark = remark
        super().__init__(f"CODE: {self.code} DESC: {remark}")

    # keep pickling (multiprocessing, Spark) working
    def __reduce__(self) -> tuple[type[BrokerResponseError], tuple[int, str | None]]:
        return (type(self), (self.code, self.remark))


def for_code(code: int) -> type[BrokerResponseError]:
    """The ``BrokerResponseError`` subclass registered for ``code`` (the base class if none)."""
    return _REGISTRY.get(int(code), BrokerResponseError)


class BrokerSystemError(BrokerResponseError):
    code = 1  # SYSTEM_ERROR
    retriable = True


class SystemBusyError(BrokerResponseError):
    code = 2  # SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupportedError(BrokerResponseError):
    code = 3  # REQUEST_CODE_NOT_SUPPORTED


class TransactionFailedError(BrokerResponseError):
    code = 4  # TRANSACTION_FAILED


class FlushDiskTimeoutError(BrokerResponseError):
    code = 10  # FLUSH_DISK_TIMEOUT (a send still counts as stored)


class SlaveNotAvailableError(BrokerResponseError):
    code = 11  # SLAVE_NOT_AVAILABLE


class FlushSlaveTimeoutError(BrokerResponseError):
    code = 12  # FLUSH_SLAVE_TIMEOUT


class MessageIllegalError(BrokerResponseError):
    code = 13  # MESSAGE_ILLEGAL


class ServiceNotAvailableError(BrokerResponseError):
    code = 14  # SERVICE_NOT_AVAILABLE
    retriable = True
    refresh_route = True


class VersionNotSupportedError(BrokerResponseError):
    code = 15  # VERSION_NOT_SUPPORTED


class NoPermissionError(BrokerResponseError):
    code = 16  # NO_PERMISSION
    retriable = True
    refresh_route = True


class TopicNotExistError(BrokerResponseError):
    code = 17  # TOPIC_NOT_EXIST
    retriable = True
    refresh_route = True


class TopicExistAlreadyError(BrokerResponseError):
    code = 18  # TOPIC_EXIST_ALREADY


class PullNotFoundError(BrokerResponseError):
    code = 19  # PULL_NOT_FOUND (pull clients map it to a status instead)
    retriable = True


class PullRetryImmediatelyError(BrokerResponseError):
    code = 20  # PULL_RETRY_IMMEDIATELY
    retriable = True


class PullOffsetMovedError(BrokerResponseError):
    code = 21  # PULL_OFFSET_MOVED


class QueryNotFoundError(BrokerResponseError):
    code = 22  # QUERY_NOT_FOUND


class SubscriptionParseFailedError(BrokerResponseError):
    code = 23  # SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(BrokerResponseError):
    code = 24  # SUBSCRIPTION_NOT_EXIST
    retriable = True


class SubscriptionNotLatestError(BrokerResponseError):
    code = 25  # SUBSCRIPTION_NOT_LATEST
    retriable = True


class SubscriptionGroupNotExistError(BrokerResponseError):
    code = 26  # SUBSCRIPTION_GROUP_NOT_EXIST


class FilterDataNotExistError(BrokerResponseError):
    code = 27  # FILTER_DATA_NOT_EXIST


class FilterDataNotLatestError(BrokerResponseError):
    code = 28  # FILTER_DATA_NOT_LATEST


class NoBuyerIdError(BrokerResponseError):
    code = 204  # NO_BUYER_ID
    retriable = True


class NotInCurrentUnitError(BrokerResponseError):
    code = 205  # NOT_IN_CURRENT_UNIT
    retriable = True


class ConsumerNotOnlineError(BrokerResponseError):
    code = 206  # CONSUMER_NOT_ONLINE


class ConsumeMsgTimeoutError(BrokerResponseError):
    code = 207  # CONSUME_MSG_TIMEOUT
    retriable = True


class NoMessageError(BrokerResponseError):
    code = 208  # NO_MESSAGE


class FlowControlError(BrokerResponseError):
    code = 215  # FLOW_CONTROL
    retriable = True


class InvalidParameterError(BrokerResponseError):
    code = 29  # INVALID_PARAMETER


# --------------------------------------------------------------------------- controller mode
# Java 5.3.3 ResponseCode 2000..2016, answered by `rmq controller` (docs/design.md "Controller mode").
# CONTROLLER_NOT_LEADER is retriable: the caller asks CONTROLLER_GET_METADATA_INFO for the leader.


class ControllerFencedMasterEpochError(BrokerResponseError):
    code = 2000  # CONTROLLER_FENCED_MASTER_EPOCH


class ControllerFencedSyncStateSetEpochError(BrokerResponseError):
    code = 2001  # CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH


class ControllerInvalidMasterError(BrokerResponseError):
    code = 2002  # CONTROLLER_INVALID_MASTER


class ControllerInvalidReplicasError(BrokerResponseError):
    code = 2003  # CONTROLLER_INVALID_REPLICAS


class ControllerMasterNotAvailableError(BrokerResponseError):
    code = 2004  # CONTROLLER_MASTER_NOT_AVAILABLE


class ControllerInvalidRequestError(BrokerResponseError):
    code = 2005  # CONTROLLER_INVALID_REQUEST


class ControllerBrokerNotAliveError(BrokerResponseError):
    code = 2006  # CONTROLLER_BROKER_NOT_ALIVE


class ControllerNotLeaderError(BrokerResponseError):
    code = 2007  # CONTROLLER_NOT_LEADER
    retriable = True


class ControllerBrokerMetadataNotExistError(BrokerResponseError):
    code = 2008  # CONTROLLER_BROKER_METADATA_NOT_EXIST


class ControllerInvalidCleanBrokerMetadataError(BrokerResponseError):
    code = 2009  # CONTROLLER_INVALID_CLEAN_BROKER_METADATA


class ControllerBrokerNeedToBeRegisteredError(BrokerResponseError):
    code = 2010  # CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


class ControllerMasterStillExistError(BrokerResponseError):
    code = 2011  # CONTROLLER_MASTER_STILL_EXIST


class ControllerElectMasterFailedError(BrokerResponseError):
    code = 2012  # CONTROLLER_ELECT_MASTER_FAILED


class ControllerAlterSyncStateSetFailedError(BrokerResponseError):
    code = 2013  # CONTROLLER_ALTER_SYNC_STATE_SET_FAILED


class ControllerBrokerIdInvalidError(BrokerResponseError):
    code = 2014  # CONTROLLER_BROKER_ID_INVALID


class ControllerJraftInternalErrorError(BrokerResponseError):
    code = 2015  # CONTROLLER_JRAFT_INTERNAL_ERROR


class ControllerBrokerLiveInfoNotExistsError(BrokerResponseError):
    code = 2016  # CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS


__all__ += [
    "ControllerFencedMasterEpochError",
    "ControllerFencedSyncStateSetEpochError",
    "ControllerInvalidMasterError",
    "ControllerInvalidReplicasError",
    "ControllerMasterNotAvailableError",
    "ControllerInvalidRequestError",
    "ControllerBrokerNotAliveError",
    "ControllerNotLeaderError",
    "ControllerBrokerMetadataNotExistError",
    "ControllerInvalidCleanBrokerMetadataError",
    "ControllerBrokerNeedToBeRegisteredError",
    "ControllerMasterStillExistError",
    "ControllerElectMasterFailedError",
    "ControllerAlterSyncStateSetFailedError",
    "ControllerBrokerIdInvalidError",
    "ControllerJraftInternalErrorError",
    "ControllerBrokerLiveInfoNotExistsError",
]


# --------------------------------------------------------------------------- misc


class RouteError(RMQError):
    """The client has no usable route: the name server knows no route for the topic, or the
    route names a broker with no address. Retriable once the route is refreshed (the topic may
    be created, the broker may register again)."""

    retriable = True
    refresh_route = True


class ClientError(RMQError):
    """The SDK was used wrongly (bad arguments, wrong state). Not retriable."""


class IllegalStateError(ClientError):
    """The object is not in a state that allows this call (not started, already closed)."""


class ConfigError(ClientError, ValueError):
    """A constructor argument of the SDK is invalid (a group name, a timeout, a batch size, a
    name server address ...). Raised when the object is built, never later; not retriable.

    Also a ``ValueError``, so ``except ValueError`` catches it.

    Attributes:
        argument: the argument's name (``"pull_batch_size"``).
        allowed: the allowed values in words (``"[1, 1024]"``), or None.
    """

    def __init__(self, argument: str, message: str, allowed: str | None = None) -> None:
        self.argument = argument
        self.detail = message
        self.allowed = allowed
        text = f"{argument}: {message}"
        if allowed is not None:
            text += f" (allowed: {allowed})"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str, str | None]]:
        return (type(self), (self.argument, self.detail, self.allowed))


class StoreError(RMQError):
    """The message store failed (I/O error, corrupt file, lock held by another process)."""


class RequestTimeoutError(RMQError):
    """A request-reply request was sent, but no reply came within its timeout (Java
    ``RequestTimeoutException``). Retriable: the responder may only have been slow; a retry
    sends a new request (with a new correlation id), so the responder may see both."""

    retriable = True


__all__ += ["RequestTimeoutError"]


class SerializationError(ClientError):
    """A producer's ``value_serializer`` / ``key_serializer`` or a consumer's
    ``value_deserializer`` raised or returned the wrong type; the cause is chained
    (``__cause__``). Not retriable: the same value fails again."""


__all__ += ["SerializationError"]
__all__ += ["InvalidParameterError"]  # typed topics (Java 5 ResponseCode.INVALID_PARAMETER)
