"""Execution timelines (vmrt.timeline, `--trace_json`): the trace is Chrome Trace Event
JSON (every event named, phased, timed and placed; spans balanced; flow arrows paired),
local-task's two independent dispatches of one wave overlap on two threads, io_parameters
batches and fence waits are recorded, and a run with tracing off makes no trace event."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from vmrt import timeline as timeline_module
from vmrt.errors import StatusCode, VmrtError
from vmrt.io import IndexProvider, ParameterIndex
from vmrt.stream import Favor, ProgramBuilder
from vmrt.stream.lower import compile_program
from vmrt.stream.runtime import StreamRunner
from vmrt.timeline import Timeline
from vmrt.tools.cli import main
from vmrt.tools.trace_json import timeline_picture
from vmrt.vm.hooks import TimelineHooks

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "examples" / "mlp.vmfb"
KERNEL_SECONDS = 0.05
TRACING_FILES = ("vmrt/timeline.py", "vmrt/hal/tracing.py")


def check_trace_schema(document: dict) -> list[dict]:
    """The events of a Trace Event document, every rule of the format checked."""
    events = document["traceEvents"]
    assert isinstance(events, list) and events
    json.loads(json.dumps(document))  # plain JSON values only
    stacks: dict = {}
    flows: dict = {}
    for event in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= event.keys(), event
        assert isinstance(event["name"], str) and isinstance(event["ts"], (int, float))
        phase = event["ph"]
        assert phase in ("X", "B", "E", "M", "s", "f"), event
        if phase == "X":
            assert event["dur"] >= 0
        elif phase == "B":
            stacks.setdefault((event["pid"], event["tid"]), []).append(event["name"])
        elif phase == "E":
            assert stacks[(event["pid"], event["tid"])].pop() == event["name"]
        elif phase in "sf":
            flows.setdefault((event["cat"], event["id"]), {})[phase] = event
    assert all(not stack for stack in stacks.values())
    for pair in flows.values():
        assert set(pair) == {"s", "f"}, pair
        assert pair["f"]["ts"] >= pair["s"]["ts"] and pair["f"]["bp"] == "e"
    return events


def per_thread(events: list[dict]) -> dict[str, list[dict]]:
    """Thread name -> that thread's spans, in time order."""
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    out: dict[str, list[dict]] = {}
    for event in sorted((e for e in events if e["ph"] == "X"), key=lambda e: e["ts"]):
        out.setdefault(names[event["tid"]], []).append(event)
    return out


def _pair_module():
    """@f: two dispatches of one wave reading the same argument, writing two results."""
    pb = ProgramBuilder("pair")
    f = pb.func("f", [("x", "external", 64)], [("external", 64), ("external", 64)])
    left, = f.dispatch("ex::left", [f.args[0]], [("external", 64)])
    right, = f.dispatch("ex::right", [f.args[0]], [("external", 64)])
    f.ret(left, right)
    return compile_program(pb.build(), Favor.MAX_CONCURRENCY, force=True)


def _meeting_kernels():
    # Each kernel waits for the other, then works a while: the two spans must overlap.
    meeting = threading.Barrier(2, timeout=30)

    def meet(x, out):
        meeting.wait()
        time.sleep(KERNEL_SECONDS)
        out[:] = x
    return {"ex::left": meet, "ex::right": meet}


def _run_pair(hooks=(), inline_ready: bool = False):
    with StreamRunner(_pair_module(), _meeting_kernels(), device="local-task", worker_count=2,
                      hooks=hooks, device_options={"inline_ready": inline_ready}) as runner:
        return runner.call("f", [bytes(range(64))]), runner


def _pair_trace(inline_ready: bool) -> dict:
    timeline = Timeline()
    with timeline:
        results, _ = _run_pair([TimelineHooks(timeline)], inline_ready)
    assert [r.tobytes() for r in results] == [bytes(range(64))] * 2
    return timeline.to_json()


@pytest.fixture(scope="module")
def pair_trace():
    """Queue work on an issue thread (inline_ready=False: the asynchronous path)."""
    return _pair_trace(False)


def test_ready_work_with_nothing_in_flight_runs_on_the_submitting_thread():
    """local-task's default: a queue.execute whose wait is reached, submitted while
    nothing is in flight, runs on the main thread (no issue thread, no fence wait);
    its two dispatches still overlap on two threads."""
    trace = _pair_trace(True)
    threads = per_thread(trace["traceEvents"])
    main_thread = [e["name"] for e in threads["MainThread"]]
    assert "queue.execute" in main_thread and "fence.wait" not in main_thread
    assert not any(name.startswith("vmrt-hal-issue") for name in threads)
    dispatches = [e for e in trace["traceEvents"] if e.get("cat") == "dispatch"]
    assert len({e["tid"] for e in dispatches}) == 2


def test_the_trace_is_trace_event_json(pair_trace):
    events = check_trace_schema(pair_trace)
    categories = {e.get("cat") for e in events if e["ph"] == "X"}
    assert categories >= {"vm", "submit", "queue", "dispatch", "fence"}


def test_two_dispatches_of_a_wave_overlap_on_two_threads(pair_trace):
    dispatches = [e for e in pair_trace["traceEvents"] if e.get("cat") == "dispatch"]
    assert sorted(e["name"] for e in dispatches) == ["ex::left/2", "ex::right/2"]
    first, second = dispatches
    assert first["tid"] != second["tid"]
    assert first["args"]["worker"] != second["args"]["worker"]
    assert first["args"]["workgroup_count"] == [1, 1, 1]
    start = max(first["ts"], second["ts"])
    end = min(first["ts"] + first["dur"], second["ts"] + second["dur"])
    # Both spans hold the moment the kernels met (each waited for the other), so
    # they overlap however late either thread woke.
    assert end > start


def test_vm_calls_queue_operations_and_fence_waits_are_where_they_ran(pair_trace):
    threads = per_thread(pair_trace["traceEvents"])
    main_thread = [e["name"] for e in threads["MainThread"]]
    assert "pair.f" in main_thread and "fence.wait" in main_thread
    assert "submit queue.execute" in main_thread
    executed = [e for name, spans in threads.items() if name.startswith("vmrt-hal-issue")
                for e in spans if e["name"] == "queue.execute"]
    assert len(executed) == 1
    # The flow arrow: from the submission on the main thread to the execution.
    flows = {e["ph"]: e for e in pair_trace["traceEvents"]
             if e["ph"] in "sf" and e["name"] == "queue.execute"}
    assert flows["f"]["ts"] == executed[0]["ts"] and flows["f"]["tid"] == executed[0]["tid"]
    call = next(e for e in threads["MainThread"] if e["name"] == "pair.f")
    assert call["ts"] <= flows["s"]["ts"] <= call["ts"] + call["dur"]


def test_tracing_off_makes_no_trace_event():
    assert timeline_module.active is None
    tracemalloc.start()
    try:
        results, runner = _run_pair()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    assert runner.context.hook_dispatcher is None  # plain generated code, no hooks
    made = [stat for stat in snapshot.statistics("filename")
            if stat.traceback[0].filename.replace("\\", "/").endswith(TRACING_FILES)]
    assert made == []
    assert [r.tobytes() for r in results] == [bytes(range(64))] * 2


def test_io_parameters_batches_are_recorded(tmp_path):
    index = ParameterIndex()
    index.add_buffer("w", np.arange(4096, dtype=np.float32).tobytes())
    pb = ProgramBuilder("load")
    f = pb.func("init", [], [("external", 16384)])
    w = f.param_load("model", "w", "external", 16384)
    f.ret(w)
    module = compile_program(pb.build())
    timeline = Timeline()
    with timeline, StreamRunner(module, {}, parameters=[IndexProvider("model", index)],
                                hooks=[TimelineHooks(timeline)]) as runner:
        result, = runner.call("init")
    assert result.tobytes() == np.arange(4096, dtype=np.float32).tobytes()
    events = check_trace_schema(timeline.to_json())
    batches = [e for e in events if e.get("cat") == "io"]
    assert batches and batches[0]["name"] == "io.read"
    assert sum(e["args"]["bytes"] for e in batches) == 16384


def test_only_one_timeline_records_at_a_time():
    with Timeline():
        with pytest.raises(VmrtError) as info:
            Timeline().start()
    assert info.value.code == StatusCode.FAILED_PRECONDITION
    assert timeline_module.active is None


def test_vmrt_run_trace_json(tmp_path, capsys):
    path = tmp_path / "run.json"
    assert main(["run", f"--module={MLP}", "--function=predict", "--device=local-task",
                 "--input=1x4xf32=1 0.5 -0.5 2", f"--trace_json={path}"]) == 0
    assert "1x3xf32=" in capsys.readouterr().out
    events = check_trace_schema(json.loads(path.read_text()))
    dispatches = [e for e in events if e.get("cat") == "dispatch"]
    assert len(dispatches) == 3 and all("workgroup_count" in e["args"] for e in dispatches)
    assert {"module.predict", "queue.execute"} <= {e["name"] for e in events}
    assert timeline_module.active is None


def test_vmrt_run_trace_json_to_a_bad_path_is_one_line(tmp_path, capsys):
    assert main(["run", f"--module={MLP}", "--function=predict",
                 "--input=1x4xf32=1 0.5 -0.5 2",
                 f"--trace_json={tmp_path / 'missing' / 'run.json'}"]) == 1
    err = capsys.readouterr().err
    assert "cannot write the trace file" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_vmrt_stream_run_trace_json(tmp_path, capsys):
    program = tmp_path / "double.stream"
    program.write_text("program @double {\n  func @f(%x: external<64>) -> (external<64>) {\n"
                       "    %y = dispatch @ex::@double(%x) -> external<64>\n"
                       "    return %y\n  }\n}\n")
    kernels = tmp_path / "kernels.py"
    kernels.write_text("def double(x, y):\n    y[:] = x * 2\n\nKERNELS = {'ex::double': double}\n")
    path = tmp_path / "stream.json"
    assert main(["stream", "run", str(program), f"--kernels={kernels}", "--input=zeros",
                 f"--trace_json={path}"]) == 0
    capsys.readouterr()
    names = {e["name"] for e in check_trace_schema(json.loads(path.read_text()))}
    assert {"double.f", "ex::double/2", "queue.execute"} <= names


def test_vmrt_check_trace_json(tmp_path, capsys):
    from tests.hal.conftest import Compiler
    module = Compiler(tmp_path)("func.func @holds() {\n  %one = util.unfoldable_constant 1 : "
                                "i32\n  check.expect_true(%one) : i32\n  return\n}\n")
    path = tmp_path / "check.json"
    assert main(["check", str(module), "--no_progress", f"--trace_json={path}"]) == 0
    capsys.readouterr()
    names = {e["name"] for e in check_trace_schema(json.loads(path.read_text()))}
    assert "module.holds" in names


def test_the_trace_picture_has_a_lane_per_thread(pair_trace):
    svg = ElementTree.fromstring(str(timeline_picture(pair_trace["traceEvents"])))
    ns = "{http://www.w3.org/2000/svg}"
    lanes = [g for g in svg.iter(f"{ns}g") if g.get("class") == "lane"]
    threads = per_thread(pair_trace["traceEvents"])
    assert len(lanes) == len(threads)
    spans = [g for g in svg.iter(f"{ns}g") if g.get("class") == "span"]
    assert len(spans) == sum(len(v) for v in threads.values())
    assert all(g.find(f"{ns}title").text for g in lanes + spans)
