import ultimate_jobs


def test_all_is_the_sorted_public_surface() -> None:
    assert ultimate_jobs.__all__ == sorted(ultimate_jobs.__all__)
    public = {name for name in dir(ultimate_jobs) if not name.startswith("_")}
    submodules = {name for name in public if type(getattr(ultimate_jobs, name)).__name__ == "module"}
    assert set(ultimate_jobs.__all__) == public - submodules


def test_every_exported_name_resolves() -> None:
    for name in ultimate_jobs.__all__:
        assert getattr(ultimate_jobs, name) is not None


def test_uuid7_ids_are_version_7_and_increase_within_a_process() -> None:
    from ultimate_jobs.ids import uuid7

    ids = [uuid7() for _ in range(20000)]
    assert all(i.version == 7 and i.variant == "specified in RFC 4122" for i in ids[:100])
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_a_uuid7_is_the_uuid_its_text_parses_to() -> None:
    # uuid7 builds its UUID without uuid.UUID's constructor; it must still be an ordinary UUID.
    import copy
    import pickle
    import uuid

    from ultimate_jobs.ids import uuid7

    made = uuid7()
    parsed = uuid.UUID(str(made))
    assert (made == parsed, hash(made) == hash(parsed), made.int == parsed.int) == (True, True, True)
    assert made.is_safe is uuid.SafeUUID.unknown and repr(made) == f"UUID('{parsed}')"
    assert pickle.loads(pickle.dumps(made)) == parsed and copy.deepcopy(made) == parsed
    assert {made: "planted"}[parsed] == "planted"


def test_every_ops_name_is_its_defining_modules_own_object() -> None:
    # Routing is applied where each function is defined, so the façade re-exports and never
    # rebinds: ops.get_job is ultimate_jobs.ops.jobs.get_job, whichever path a caller imports.
    import importlib

    from ultimate_jobs import ops

    functions = [name for name in ops.__all__
                 if callable(getattr(ops, name)) and not isinstance(getattr(ops, name), type)]
    assert "get_job" in functions and "queue_stats" in functions
    for name in functions:
        value = getattr(ops, name)
        assert getattr(importlib.import_module(value.__module__), name) is value, name
