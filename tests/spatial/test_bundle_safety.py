"""Nothing lost, nothing left behind, nothing trusted: a bundle folder is replaced only when it holds nothing but what
a lowering wrote; interrupted, killed and concurrent writers leave nothing beside it; the reader refuses a manifest
its schema, or its own consistency, does not allow, and any path that leaves the bundle."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from streamed.cli import main
from streamed.spatial import bundle as bundle_module
from streamed.spatial.bundle import FORMAT, BundleError, manifest, read_bundle, write_bundle
from streamed.spatial.deployment import Deployment
from streamed.spatial.streamed_model import lower_streamed

from repo import EXAMPLES

TINY = str(EXAMPLES / "tiny-llama.lgm")


def beside(folder) -> list[str]:
    """What is in the bundle's parent folder, besides the bundle."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


def files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def model(analyses):
    return lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=64))


# ---- nothing lost ---------------------------------------------------------------------------------------------------


def test_relowering_into_a_folder_holding_other_files_refuses_naming_the_first_and_keeps_everything(tmp_path, capsys):
    """Issue 11's reproduction: NOTES.md and .git inside the bundle folder were deleted by the next `lower`."""
    out = tmp_path / "b"
    assert main(["lower", TINY, "--ctx", "64", "-o", str(out)]) == 0
    (out / "NOTES.md").write_text("n\n")
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref\n")
    before = files(out)
    capsys.readouterr()
    assert main(["lower", TINY, "--ctx", "128", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"streamed: {out}: holds .git/, which no lowering wrote; lower into another folder, or move it " \
                  f"out first\n"
    assert files(out) == before and beside(out) == []


@pytest.mark.parametrize("foreign", ["programs/extra.json", "programs/notes/", "manifest.json.bak", "link"])
def test_a_single_foreign_entry_anywhere_in_the_bundle_keeps_it_from_being_replaced(tmp_path, model, foreign):
    out = tmp_path / "b"
    write_bundle(model, out)
    path = out / foreign.rstrip("/")
    if foreign == "link":
        path.symlink_to(out / "manifest.json")
    elif foreign.endswith("/"):
        path.mkdir()
    else:
        path.write_text("{}")
    with pytest.raises(BundleError, match=f"holds {foreign}, which no lowering wrote"):
        write_bundle(model, out)
    assert path.exists() or path.is_symlink()


def test_a_bundle_is_replaced_when_it_holds_only_what_its_manifest_lists(tmp_path, model, analyses):
    out = tmp_path / "b"
    write_bundle(model, out)
    listed = json.loads((out / "manifest.json").read_text())["files"]
    assert sorted(files(out)) == listed == sorted(listed)
    other = lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=128))
    write_bundle(other, out)
    assert manifest(read_bundle(out)) == manifest(other) and beside(out) == []


def test_a_bundle_written_before_manifests_listed_their_files_is_still_replaced(tmp_path, model):
    out = tmp_path / "b"
    write_bundle(model, out)
    m = json.loads((out / "manifest.json").read_text())
    del m["files"]
    (out / "manifest.json").write_text(json.dumps(m))
    write_bundle(model, out)
    assert "files" in json.loads((out / "manifest.json").read_text())


def test_o_naming_a_symbolic_link_replaces_the_bundle_it_points_to_and_keeps_the_link(tmp_path, model):
    real = tmp_path / "bundles" / "real"
    real.parent.mkdir()
    write_bundle(model, real)
    link = tmp_path / "b"
    link.symlink_to(real, target_is_directory=True)
    assert main(["lower", TINY, "--ctx", "128", "-o", str(link)]) == 0
    assert link.is_symlink() and read_bundle(real).deployment.ctx == 128
    assert beside(real) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["b", "bundles"]


def test_a_figure_that_is_not_finite_is_never_written_as_bare_nan(tmp_path, model):
    """manifest.json is strict JSON: a NaN in the estimate refuses the write rather than writing `NaN`."""
    import dataclasses

    broken = dataclasses.replace(model, estimate={**model.estimate, "tokens_per_second": float("nan")})
    with pytest.raises(BundleError, match="not a finite number"):
        write_bundle(broken, tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


# ---- nothing left behind ----------------------------------------------------------------------------------------


def _stopping(monkeypatch, signum, during="write"):
    """Make a stop signal arrive while the bundle's files are written (``write``) or while it is put in place."""
    if during == "write":
        real = bundle_module.manifest

        def arrives(*args, **kw):
            out = real(*args, **kw)
            os.kill(os.getpid(), signum)
            return out

        monkeypatch.setattr(bundle_module, "manifest", arrives)
    else:
        real = bundle_module._install

        def arrives(*args, **kw):
            os.kill(os.getpid(), signum)
            return real(*args, **kw)

        monkeypatch.setattr(bundle_module, "_install", arrives)


@pytest.mark.parametrize("signum,status,said", [(signal.SIGTERM, 143, "stopped by SIGTERM"),
                                                 (signal.SIGHUP, 129, "stopped by SIGHUP"),
                                                 (signal.SIGINT, 130, "interrupted")])
def test_a_stop_signal_while_the_bundle_is_written_keeps_the_old_one_and_leaves_no_temporary(
        tmp_path, capsys, monkeypatch, signum, status, said):
    out = tmp_path / "b"
    assert main(["lower", TINY, "--ctx", "64", "-o", str(out)]) == 0
    before = files(out)
    capsys.readouterr()
    _stopping(monkeypatch, signum, "write")
    assert main(["lower", TINY, "--ctx", "128", "-o", str(out)]) == status
    assert capsys.readouterr().err == f"streamed: {said}\n"
    assert files(out) == before and beside(out) == []


def test_a_stop_signal_while_the_bundle_is_put_in_place_installs_it_and_says_so_with_status_0(
        tmp_path, capsys, monkeypatch):
    """An installed bundle is not "interrupted": the signal waits for the two renames, and the command says what
    happened."""
    out = tmp_path / "b"
    assert main(["lower", TINY, "--ctx", "64", "-o", str(out)]) == 0
    capsys.readouterr()
    _stopping(monkeypatch, signal.SIGINT, "install")
    assert main(["lower", TINY, "--ctx", "128", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"{out}: decode bundle (ctx 128)" in captured.out
    assert "SIGINT came while the bundle was put in place; it was finished first, and is whole" in captured.err
    assert read_bundle(out).deployment.ctx == 128 and beside(out) == []


def test_what_a_killed_writer_left_is_removed_and_its_old_bundle_put_back_by_the_next(tmp_path, model, analyses):
    out = tmp_path / "b"
    write_bundle(model, out)
    # A writer killed between its two renames: the bundle moved aside, its new one complete in a temporary.
    os.rename(out, tmp_path / ".b.4242.old")
    write_bundle(model, tmp_path / "scratch")
    os.rename(tmp_path / "scratch", tmp_path / ".b.4243.tmp")
    (tmp_path / ".b.4244.tmp" / "programs").mkdir(parents=True)  # one killed while it wrote
    (tmp_path / ".b.4244.tmp" / "programs" / "head.json").write_text('{"form')
    (tmp_path / ".b.notes.tmp").mkdir()  # not a writer's name: not ours to remove
    other = lower_streamed(analyses["tiny-llama"], Deployment("decode", ctx=128))
    write_bundle(other, out)
    assert manifest(read_bundle(out)) == manifest(other)
    assert beside(out) == [".b.notes.tmp"]


def test_a_writer_killed_outright_leaves_nothing_the_next_run_does_not_remove(tmp_path):
    """SIGKILL cannot be caught: whatever it leaves (a temporary, the old bundle moved aside) the next `lower`
    removes or puts back, and the bundle is always whole."""
    out = tmp_path / "b"
    run = [sys.executable, "-m", "streamed", "lower", TINY, "--ctx", "64", "-o", str(out)]
    assert subprocess.run(run, capture_output=True).returncode == 0
    for delay in (0.25, 0.4, 0.5, 0.6, 0.8):
        p = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.kill()
        p.wait()
        done = subprocess.run(run, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert beside(out) == [] and read_bundle(out).deployment.ctx == 64


def test_concurrent_writers_to_one_folder_all_succeed_in_turn_and_leave_nothing_beside_it(tmp_path):
    """Issue 11: two writers to one `-o` failed about 30% of the time and left a stale `.old`."""
    out = tmp_path / "b"
    runs = [subprocess.Popen([sys.executable, "-m", "streamed", "lower", TINY, "--ctx", str(ctx), "-o", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for ctx in (32, 64, 96, 128)]
    for p in runs:
        assert p.wait() == 0, p.stderr.read()
    assert read_bundle(out).deployment.ctx in (32, 64, 96, 128) and beside(out) == []


def test_writers_racing_in_threads_take_turns_and_every_write_succeeds(tmp_path, model):
    """Four threads writing one bundle twenty times each: without the folder's lock most writes failed with
    "Directory not empty" and a `.b.<pid>.old` stayed behind."""
    import threading

    out, errors = tmp_path / "b", []

    def writer():
        for _ in range(20):
            try:
                write_bundle(model, out)
            except BundleError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and manifest(read_bundle(out)) == manifest(model) and beside(out) == []


def test_a_writer_behind_a_stuck_one_gives_up_naming_the_folder_and_writes_nothing(tmp_path, model, monkeypatch):
    """A lowering that holds the folder's lock and changes nothing in it is stuck: the next writer says so in one
    line instead of waiting forever (the wait is shortened here; it is a minute for a user)."""
    import fcntl

    monkeypatch.setattr(bundle_module, "LOCK_WAIT_SECONDS", 0.3)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(BundleError, match=r"another lowering has held .* without writing anything"):
            write_bundle(model, tmp_path / "b")
    finally:
        os.close(fd)
    assert not (tmp_path / "b").exists() and beside(tmp_path / "b") == []


# ---- nothing trusted --------------------------------------------------------------------------------------------


def _mutations(m: dict):
    """Single-field mutations of a manifest: every scalar, list and object in it replaced by values of other types,
    out of range, or empty."""
    replacements = [None, True, "x", -1, 0, 2**70, 1.5, float("inf"), [], {}, [1], {"a": 1}, "/etc/passwd",
                    "../../x.json"]

    def walk(value, path):
        yield path
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, (*path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value[:3]):
                yield from walk(v, (*path, i))

    for path in walk(m, ()):
        if not path:
            continue
        for r in replacements:
            copy = json.loads(json.dumps(m))
            at = copy
            for p in path[:-1]:
                at = at[p]
            at[path[-1]] = r
            yield path, r, copy


def read_to_run(path: tuple) -> bool:
    """Whether ``read_bundle`` reads the field at ``path`` to build the model a runtime runs (the estimate, the
    residency report, a kind's description of its weights' loads and tables, the title only describe it)."""
    top = ("format", "mode", "ctx", "rows", "batch", "chunk", "tp", "programs", "step", "target_spec", "checkpoint")
    if path[0] in top:
        return True
    if path[0] == "kinds" and len(path) > 2:
        return path[2] in ("name", "representative", "layers", "program", "carried") or \
            (path[2] in ("weights", "states") and path[-1] == "name")
    return path[0] == "layers" and len(path) > 2 and path[2] in ("layer", "kind", "weights", "states", "checkpoint",
                                                                   "storage")


def test_every_single_field_mutation_of_a_manifest_is_a_bundle_or_one_bundle_error(tmp_path, model):
    """600 of them (of some 3,600) used to load without complaint (`ctx: "x"`, negative layers) or escape as tracebacks. Now
    each loads as a bundle whose parts hang together, or is one line naming the file; and one that changes the type
    of a field a runtime reads is always refused."""
    out = tmp_path / "b"
    write_bundle(model, out)
    good = json.loads((out / "manifest.json").read_text())
    refused = loaded = 0
    every = list(_mutations(good))
    for path, value, mutated in random.Random(11).sample(every, 600):
        (out / "manifest.json").write_text(json.dumps(mutated))
        try:
            got = read_bundle(out)
        except BundleError as e:
            assert "\n" not in str(e) and str(e).startswith(str(out)), (path, value, e)
            refused += 1
            continue
        loaded += 1
        original = good
        for p in path:
            original = original[p]
        number = lambda v: float if type(v) in (int, float) and not isinstance(v, bool) else type(v)  # noqa: E731
        retyped = (type(value) is not type(original) if isinstance(original, int) else number(value) is not number(original))
        retyped = retyped and original is not None  # a field that may be null may hold a value
        assert not (read_to_run(path) and retyped), (path, value)
        assert got.deployment.refusal() is None and [b.layer for b in got.layers] == list(range(len(got.layers)))
    assert len(every) > 3000 and refused > loaded


@pytest.mark.parametrize("program", ["/etc/passwd", "../outside.json", "programs/../../outside.json"])
def test_a_program_path_that_leaves_the_bundle_is_refused_before_anything_is_opened(tmp_path, model, program):
    out = tmp_path / "b"
    write_bundle(model, out)
    (tmp_path / "outside.json").write_text((out / "programs" / "head.json").read_text())
    m = json.loads((out / "manifest.json").read_text())
    m["programs"]["head"] = program
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match=f"manifest.json: not a {FORMAT} manifest: programs.head"):
        read_bundle(out)


def test_a_program_that_is_a_link_out_of_the_bundle_is_refused(tmp_path, model):
    out = tmp_path / "b"
    write_bundle(model, out)
    (tmp_path / "outside.json").write_text((out / "programs" / "head.json").read_text())
    (out / "programs" / "head.json").unlink()
    (out / "programs" / "head.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(BundleError, match="leads out of the bundle through a symbolic link"):
        read_bundle(out)


@pytest.mark.parametrize("edit,message", [
    (lambda m: m.update(programs=True), "programs: True is not of type 'object'"),
    (lambda m: m.update(ctx="x"), "ctx: 'x' is not of type 'integer'"),
    (lambda m: m["layers"][1].update(layer=-1), "layers[1].layer: -1 is less than the minimum of 0"),
    (lambda m: m["layers"][1].update(layer=0), "its layers are [0, 0, 2, 3], not 0, 1, 2, … in order"),
    (lambda m: m["layers"][2].update(kind="other"), "layer 2 runs kind `other`, which it does not list"),
    (lambda m: m["kinds"][0].update(representative=9), "representative, layer 9, is not one of its layers"),
    (lambda m: m["target_spec"].update(pmus=0), "target_spec.pmus: 0 is less than the minimum of 1"),
])
def test_verify_bundle_on_a_manifest_that_does_not_hang_together_is_one_line_and_exit_2(
        tmp_path, capsys, edit, message):
    out = tmp_path / "b"
    assert main(["lower", TINY, "--ctx", "64", "-o", str(out)]) == 0
    m = json.loads((out / "manifest.json").read_text())
    edit(m)
    (out / "manifest.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert main(["verify", TINY, "--bundle", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
