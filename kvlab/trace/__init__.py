"""kvlab.trace: record, store, replay, check and explain what the KV-cache manager did.

The trace is the product's spine: core reports every state change to a ``Recorder``; the
``Trace`` it produces stores events in numpy columns, saves/loads a versioned file, replays the
exact state at any event (``state_at``), checks invariants and explains prefix-cache misses.

Examples:
    >>> from kvlab.trace import Recorder, KVState, EventKind
    >>> rec = Recorder(initial_state=KVState.fresh(num_blocks=4))
    >>> rec.popleft_n([1, 2]); rec.get_new_blocks([1, 2])
    >>> trace = rec.trace()
    >>> trace.find(EventKind.GET_NEW_BLOCKS), trace.state_at(1).ref_cnt
    (1, [0, 1, 1, 0])
"""

from kvlab.trace.events import CALL_SPECS, KIND_SCHEMA, EventKind
from kvlab.trace.explain import EvictionCause, Explanation, Probe, Turn, explain
from kvlab.trace.explain_nano import NanoExplanation, NanoFacts, NanoProbe, explain_allocate, nano_facts
from kvlab.trace.fileformat import FORMAT_VERSION, TraceFormatError, load_trace, save_trace
from kvlab.trace.invariants import InvariantError, check_invariants
from kvlab.trace.recorder import Recorder
from kvlab.trace.replay import ReplayError
from kvlab.trace.state import KVState
from kvlab.trace.trace import Trace
from kvlab.trace.view import Call, Event

__all__ = [
    "CALL_SPECS",
    "FORMAT_VERSION",
    "KIND_SCHEMA",
    "Call",
    "Event",
    "EventKind",
    "EvictionCause",
    "Explanation",
    "InvariantError",
    "KVState",
    "NanoExplanation",
    "NanoFacts",
    "NanoProbe",
    "Probe",
    "Recorder",
    "ReplayError",
    "Trace",
    "TraceFormatError",
    "Turn",
    "check_invariants",
    "explain",
    "explain_allocate",
    "load_trace",
    "nano_facts",
    "save_trace",
]
