#!/usr/bin/env python3
"""Writes the binary seeds of the protocol fuzz targets (fuzz/corpus/runner_protocol_fuzz and
service_wire_fuzz): protobuf messages encoded by hand (no protobuf module needed) and artifact
blobs in codegen/artifact.cc's format. The text seeds of the other targets are plain files.
Run from anywhere: python3 fuzz/make_seeds.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_varint(n, v):
    return varint(n << 3 | 0) + varint(v)


def f_bytes(n, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(n << 3 | 2) + varint(len(b)) + b


def f_double(n, v):
    return varint(n << 3 | 1) + struct.pack("<d", v)


def u64(v):
    return struct.pack("<Q", v & ((1 << 64) - 1))


def s(b):
    if isinstance(b, str):
        b = b.encode()
    return u64(len(b)) + b


def artifact_body(args, entry="matmul", obj=b"\x7fELF" + bytes(60)):
    body = s(b"KTUNEART") + u64(1) + s(obj) + s(entry) + s("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4") + s("19.1.7")
    body += u64(len(args))
    for shape, dtype, out in args:
        body += u64(len(shape)) + b"".join(u64(d) for d in shape) + s(dtype) + u64(out)
    return body


def fnv1a(b):
    h = 1469598103934665603
    for x in b:
        h = ((h ^ x) * 1099511628211) & ((1 << 64) - 1)
    return h


def with_checksum(body):
    return body + u64(fnv1a(body))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def timing():
    return (f_varint(1, 4) + f_varint(2, 3) + f_double(3, 0.0) + f_varint(6, 1) + f_double(7, 1e-4) +
            f_double(8, 1e-5) + f_varint(9, 2))


def main():
    mm = [([16, 16], "float32", 0), ([16, 16], "float32", 0), ([16, 16], "float32", 1)]
    conv = [([1, 2, 9, 9], "float32", 0), ([2, 2, 3, 3], "float32", 0), ([1, 2, 9, 9], "float32", 1)]
    # runner_protocol_fuzz: selector byte, then the message.
    request = (f_varint(1, 1) + f_varint(2, 2) + f_bytes(3, "matmul(M=16,N=16,K=16,dtype=float32)|host") +
               f_bytes(4, with_checksum(artifact_body(mm))) + f_varint(5, 7) + f_bytes(6, timing()))
    write("runner_protocol_fuzz", "request_measure", b"\x00" + request)
    write("runner_protocol_fuzz", "request_reference", b"\x00" + f_varint(1, 1) + f_varint(2, 1) +
          f_bytes(3, "k") + f_bytes(4, with_checksum(artifact_body(conv, "conv"))))
    write("runner_protocol_fuzz", "reply_ok", b"\x01" + f_bytes(3, struct.pack("<ddd", 1e-3, 1.1e-3, 0.9e-3)))
    write("runner_protocol_fuzz", "reply_error", b"\x01" + f_bytes(1, "run_timeout") + f_bytes(2, "timed out"))
    write("runner_protocol_fuzz", "artifact_matmul", b"\x02" + artifact_body(mm))
    write("runner_protocol_fuzz", "artifact_int", b"\x02" + artifact_body([([300], "int64", 0), ([7, 3], "int8", 1)]))
    reply = f_bytes(3, struct.pack("<d", 2e-3))
    write("runner_protocol_fuzz", "frames", b"\x03" + u64(len(reply)) + reply + u64(0))

    # service_wire_fuzz: selector byte, then the message.
    measure = (f_varint(1, 4) + f_varint(2, 3) + f_double(3, 0.0) + f_varint(6, 1) + f_double(7, 1e-4) +
               f_double(8, 1e-5) + f_double(9, 10.0) + f_double(10, 10.0) + f_varint(11, 1) + f_varint(12, 3))
    job = (f_varint(1, 2) + f_bytes(2, "matmul") + f_bytes(3, json.dumps({"M": "64", "N": 64, "K": "64"})) +
           f_bytes(4, "host") + f_bytes(5, "x86-avx512") + f_varint(6, 64) + f_bytes(7, "xgb") + f_varint(8, 1) +
           f_varint(9, 16) + f_bytes(11, "knob") + f_varint(12, 1) + f_bytes(13, measure) + f_varint(14, 1) +
           f_bytes(15, "me@host"))
    write("service_wire_fuzz", "submit_job", b"\x00" + job)
    write("service_wire_fuzz", "submit_job_conv", b"\x00" + f_varint(1, 2) + f_bytes(2, "conv2d") +
          f_bytes(3, json.dumps({"C": "8", "H": "14", "W": "14", "K": "8", "pad": "1"})) + f_bytes(5, "k") +
          f_varint(6, 8) + f_bytes(7, "random") + f_varint(9, 4) + f_bytes(13, measure) + f_varint(14, 3))
    result = f_varint(1, 5) + f_bytes(2, struct.pack("<dd", 1e-3, 1e-3)) + f_double(5, 0.2) + f_double(6, 0.01)
    write("service_wire_fuzz", "worker_result", b"\x01" + f_bytes(2, result))
    write("service_wire_fuzz", "worker_error", b"\x01" + f_bytes(2, f_varint(1, 6) + f_bytes(3, "wrong_answer") +
                                                           f_bytes(4, "element 3")))
    hello = (f_varint(1, 2) + f_bytes(2, "x86") + f_bytes(3, "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4") +
             f_varint(4, 2) + f_varint(6, 2) + f_varint(7, 1) + f_double(8, 230.0) + f_varint(9, 512))
    write("service_wire_fuzz", "worker_hello", b"\x01" + f_bytes(1, hello))
    spec = {"template": "matmul", "args": {"M": "64", "N": "64", "K": "64"}, "target": "host", "device_key": "x86",
            "trials": 64, "tuner": "xgb", "seed": 0, "batch_size": 16, "early_stopping": 0, "xgb_features": "knob",
            "transfer": True, "measure": {"number": 4, "repeat": 3, "min_repeat_ms": 0, "build_timeout_s": 10,
                                          "run_timeout_s": 10, "cooldown_s": 0, "flush_cache": False,
                                          "check_correctness": True, "rtol": 1e-4, "atol": 1e-5},
            "run_threads": 0, "data_seed": 0, "priority": 1, "owner": "me"}
    write("service_wire_fuzz", "job_spec_json", b"\x02" + json.dumps(spec).encode())
    info = f_varint(1, 3) + f_bytes(2, "running") + f_bytes(3, "matmul(M=64)") + f_varint(6, 64) + f_varint(7, 16)
    progress = (f_varint(1, 16) + f_varint(2, 64) + f_varint(3, 15) +
                f_bytes(4, f_bytes(1, "build_timeout") + f_varint(2, 1)) + f_double(5, 40.0) + f_varint(8, 1) +
                f_double(9, 0.5))
    write("service_wire_fuzz", "job_event", b"\x03" + f_bytes(1, info) + f_bytes(2, progress) + f_bytes(3, "{}"))


if __name__ == "__main__":
    main()
