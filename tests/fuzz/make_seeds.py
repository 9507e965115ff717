#!/usr/bin/env python3
"""Writes the fixture-derived seed corpora of the fuzz targets (corpus/<target>/) from
tests/data. Seeds stay small (a few KB each). The cache and C API seeds are not derived here:
see docs/FUZZING.md ("Seeds")."""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "data"
FIXTURES = ["qwen3-f32", "qwen3-bf16", "qwen2-f32", "qwen2-bf16", "llama-f32", "llama-bf16-sharded"]


def write(target, name, data):
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def read_safetensors(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def pack(header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def small_file(header, data, keep):
    """A valid safetensors file with the `keep` smallest tensors of a fixture (real bytes)."""
    entries = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])[:keep]
    out, blob = {"__metadata__": {"format": "pt"}}, b""
    for k, v in entries:
        b, e = v["data_offsets"]
        out[k] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [len(blob), len(blob) + e - b]}
        blob += data[b:e]
    return pack(out, blob)


def main():
    for fx in FIXTURES:
        d = DATA / fx
        write("config", f"{fx}.json", (d / "config.json").read_text())
        files = sorted(d.glob("*.safetensors"))
        header, data = read_safetensors(files[0])
        tag = f"{fx}-{files[0].stem}" if len(files) > 1 else fx
        # The real header with an empty data section (every offset is out of range) ...
        raw = files[0].read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        write("safetensors", f"{tag}-header", raw[:8 + n])
        # ... and small valid files built from its smallest tensors.
        write("safetensors", f"{tag}-small", small_file(header, data, 3))
    write("safetensors", "empty-header", pack({}, b""))
    write("safetensors", "zero-size-tensor",
          pack({"a": {"dtype": "F16", "shape": [0, 3], "data_offsets": [0, 0]},
                "b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}, b"\x80\x3f\x00\x40"))
    index = DATA / "llama-bf16-sharded" / "model.safetensors.index.json"
    write("sharded_index", "llama-bf16-sharded.json", index.read_text())
    j = json.loads(index.read_text())
    write("sharded_index", "compact.json", json.dumps(j, separators=(",", ":")))
    j["weight_map"] = dict(list(j["weight_map"].items())[:3])
    write("sharded_index", "partial.json", json.dumps(j))


if __name__ == "__main__":
    main()
