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
