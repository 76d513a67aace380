"""rmq.errors: the code → exception registry and the retry policy it carries."""
import pickle

import pytest

from rmq import errors
from rmq.remoting.codes import ResponseCode


def test_for_code_maps_response_codes():
    assert errors.for_code(ResponseCode.TOPIC_NOT_EXIST) is errors.TopicNotExistError
    assert errors.for_code(2) is errors.SystemBusyError
    assert errors.for_code(9999) is errors.BrokerResponseError  # unknown codes still raise something useful
    exc = errors.for_code(17)(17, "No topic route info")
    assert exc.code == 17 and exc.remark == "No topic route info" and "17" in str(exc)
    assert exc.retriable and exc.refresh_route


@pytest.mark.parametrize("code, retriable", [(17, True), (14, True), (1, True), (16, True), (204, True), (205, True),
                                             (13, False), (3, False), (26, False)])
def test_producer_retry_policy_matches_java(code, retriable):
    assert errors.for_code(code).retriable is retriable


def test_registry_refuses_duplicates():
    with pytest.raises(TypeError, match="already mapped"):
        class Again(errors.BrokerResponseError):
            code = 17


def test_every_registered_class_names_a_real_code():
    for name in errors.__all__:
        cls = getattr(errors, name)
        if (isinstance(cls, type) and issubclass(cls, errors.BrokerResponseError)
                and cls is not errors.BrokerResponseError):
            assert cls.code in {c.value for c in ResponseCode}, cls
            assert errors.for_code(cls.code) is cls


def test_remoting_errors_say_whether_to_retry():
    assert errors.RemotingConnectError("a:1").retriable
    assert errors.RemotingTimeoutError("a:1", 3.0).retriable
    assert errors.RemotingSendRequestError("a:1").retriable
    assert errors.RemotingTooMuchRequestError("x").retriable
    assert not errors.RemotingCommandError("bad").retriable
    assert not errors.IllegalStateError("x").retriable
    assert isinstance(errors.RemotingTimeoutError("a:1", 1), errors.RemotingError)
    assert isinstance(errors.TopicNotExistError(17, "x"), errors.RMQError)


def test_broker_errors_pickle():
    exc = pickle.loads(pickle.dumps(errors.TopicNotExistError(17, "gone")))
    assert type(exc) is errors.TopicNotExistError and exc.code == 17 and exc.remark == "gone"
