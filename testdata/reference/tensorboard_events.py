"""Reads a folder of TensorBoard event files with TensorBoard's own readers; writes JSON.

Usage: tensorboard_events.py DIR OUT_JSON

For the tests of `conveyor train --tensorboard DIR` (conveyor/cli/tensorboard_cli_test.cc).
Each event file of DIR is read record by record with TensorBoard's raw loader
(event_file_loader.RawEventFileLoader, which stops quietly at a truncated or corrupt
record), so the bytes it consumed are compared with the file's size; its events are parsed
as tensorflow.Event protos. Then the folder is loaded as TensorBoard shows it
(event_accumulator.EventAccumulator, every scalar kept). OUT_JSON holds:

  files:   [{name, bytes, read_bytes, events, file_version}] per event file
  scalars: {tag: [[step, value], ...]} from the accumulator, in step order
"""

import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.proto import event_pb2


def read_file(path):
    loader = event_file_loader.RawEventFileLoader(path)
    read_bytes = 0
    events = 0
    file_version = ""
    for record in loader.Load():
        # A record's framing: 8 bytes of length, 4 of its CRC, the data, 4 of the data's CRC.
        read_bytes += len(record) + 16
        event = event_pb2.Event.FromString(record)
        if event.HasField("file_version"):
            file_version = event.file_version
        events += 1
    return {
        "name": os.path.basename(path),
        "bytes": os.path.getsize(path),
        "read_bytes": read_bytes,
        "events": events,
        "file_version": file_version,
    }


def main():
    folder, out = sys.argv[1], sys.argv[2]
    files = [
        read_file(os.path.join(folder, name))
        for name in sorted(os.listdir(folder))
        if "tfevents" in name
    ]
    accumulator = event_accumulator.EventAccumulator(
        folder, size_guidance={event_accumulator.SCALARS: 0}
    )
    accumulator.Reload()
    scalars = {
        tag: [[s.step, s.value] for s in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }
    with open(out, "w") as f:
        json.dump({"files": files, "scalars": scalars}, f)


if __name__ == "__main__":
    main()
