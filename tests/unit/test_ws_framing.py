"""The `/ws` frames for a batch of events: bare in base mode, in the stream's envelope in mux mode."""

from __future__ import annotations

import json

from transports.ws_framing import event_frames

EVENTS = [(7, b'{"type":"TEXT_MESSAGE_CONTENT","delta":"a"}'), (0, b'{"type":"RUN_ERROR","message":"x"}')]


def test_base_mode_sends_each_event_as_it_is():
    assert event_frames(EVENTS, "s1", True, mux=False) == [data for _, data in EVENTS]


def test_mux_mode_wraps_each_event_with_its_stream_and_position():
    frames = [json.loads(frame) for frame in event_frames(EVENTS, "s1", True, mux=True)]
    assert frames[0] == {"id": "s1", "eventId": "7", "event": json.loads(EVENTS[0][1])}
    assert frames[1] == {"id": "s1", "event": json.loads(EVENTS[1][1])}  # position 0: not in the log
    assert all("eventId" not in frame for frame in map(json.loads, event_frames(EVENTS, "s1", False, mux=True)))


def test_an_error_that_belongs_to_no_stream_still_comes_in_the_envelope():
    [frame] = event_frames(EVENTS[1:], None, False, mux=True)
    assert json.loads(frame) == {"id": None, "event": json.loads(EVENTS[1][1])}
