"""rmq.errors: the code → exception registry and the retry policy it carries."""

import pickle

import pytest

from rmq import errors
from rmq.protocol.codes import ResponseCode


def test_for_code_maps_response_codes():
    assert errors.for_code(ResponseCode.TOPIC_NOT_EXIST) is errors.TopicNotExistError
    assert errors.for_code(2) is errors.SystemBusyError
    assert errors.for_code(9999) is errors.BrokerResponseError  # unknown codes still raise something useful
    exc = errors.for_code(17)(17, "No topic route info")
    assert exc.code == 17 and exc.remark == "No topic route info" and "17" in str(exc)
    assert exc.retriable and exc.refresh_route


@pytest.mark.parametrize(
    "code, retriable",
    [(17, True), (14, True), (1, True), (16, True), (204, True), (205, True), (13, False), (3, False), (26, False)],
)
def test_producer_retry_policy_matches_java(code, retriable):
    assert errors.for_code(code).retriable is retriable


def test_registry_refuses_duplicates():
    with pytest.raises(TypeError, match="already mapped"):

        class Again(errors.BrokerResponseError):
            code = 17


def test_every_registered_class_names_a_real_code():
    for name in errors.__all__:
        cls = getattr(errors, name)
        if (
            isinstance(cls, type)
            and issubclass(cls, errors.BrokerResponseError)
            and cls is not errors.BrokerResponseError
        ):
            assert cls.code in {c.value for c in ResponseCode}, cls
            assert errors.for_code(cls.code) is cls


# Response codes no exception class stands for, and why: SUCCESS is no error; 200..203 are
# END_TRANSACTION's and CHECK_TRANSACTION_STATE's outcomes (Java ``ResponseCode``'s transaction
# states, read as statuses, never raised); 209..211 are the ACL admin's failures, which
# rmq.Admin reports as AdminError with the peer's code.
NOT_AN_ERROR_CLASS = {
    "SUCCESS",
    "TRANSACTION_SHOULD_COMMIT",
    "TRANSACTION_SHOULD_ROLLBACK",
    "TRANSACTION_STATE_UNKNOW",
    "TRANSACTION_STATE_GROUP_WRONG",
    "UPDATE_AND_CREATE_ACL_CONFIG_FAILED",
    "DELETE_ACL_CONFIG_FAILED",
    "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED",
}
# Classes named otherwise than after their code (``SystemError`` is a Python builtin).
CLASS_NAME = {"SYSTEM_ERROR": "BrokerSystemError"}


def _registered() -> list[type[errors.BrokerResponseError]]:
    return [
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, errors.BrokerResponseError)
        and "code" in vars(cls)
        and cls is not errors.BrokerResponseError
    ]


def test_every_error_class_agrees_with_the_response_code_table():
    """errors.py sits below every layer, so it cannot import ResponseCode: each class repeats its
    code as a number. Here that number, the class's name and the ``# NAME`` comment beside it
    must all be the table's."""
    import inspect
    import re

    src = inspect.getsource(errors)
    commented = {int(n): name for n, name in re.findall(r"^    code = (\d+)  # ([A-Z_]+)", src, re.M)}
    bad = []
    for cls in _registered():
        code = ResponseCode(cls.code)  # ValueError: a code the table does not have
        want = CLASS_NAME.get(code.name) or "".join(w.capitalize() for w in code.name.split("_")) + "Error"
        if cls.__name__ != want:
            bad.append(f"{cls.__name__}: code {cls.code} is {code.name}, so the class is {want}")
        if commented.get(cls.code) != code.name:
            bad.append(
                f"{cls.__name__}: the comment beside `code = {cls.code}` says "
                f"{commented.get(cls.code)}, the table {code.name}"
            )
    assert not bad, "\n".join(bad)
    assert len(commented) == len(_registered())


def test_every_failure_code_has_its_error_class():
    mapped = {cls.code for cls in _registered()}
    missing = [c.name for c in ResponseCode if c.value not in mapped and c.name not in NOT_AN_ERROR_CLASS]
    assert not missing, f"add a BrokerResponseError subclass to rmq/errors.py (or a reason here) for {missing}"
    assert not {c.value for c in ResponseCode if c.name in NOT_AN_ERROR_CLASS} & mapped


def test_the_table_check_sees_a_mismatch():
    """The name rule itself: a class whose code names another ResponseCode member is caught."""
    code = ResponseCode(errors.TopicNotExistError.code)
    assert "".join(w.capitalize() for w in code.name.split("_")) + "Error" == "TopicNotExistError"
    assert ResponseCode(errors.TopicExistAlreadyError.code).name != "TOPIC_NOT_EXIST"


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
