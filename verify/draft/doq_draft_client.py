"""DoQ over QUIC drafts 29-32, for doxlab verify.

quic-go and current aioquic speak only QUIC v1 and v2; aioquic 0.9.25 is
the last release that still speaks the drafts early DoQ servers ran on.
Usage: python doq_draft_client.py HOST PORT NAME TIMEOUT VERSION...
(versions as hex, e.g. ff00001d). Prints one JSON object: the version and
ALPN negotiated, the rcode of a real query, or the error.
"""
import asyncio
import json
import ssl
import struct
import sys

from aioquic.asyncio import connect
from aioquic.quic.configuration import QuicConfiguration

ALPNS = ["doq"] + ["doq-i%02d" % i for i in range(11, -1, -1)]
# Drafts before -i03 sent the message without its 2-octet length.
UNPREFIXED = {"doq-i00", "doq-i01", "doq-i02"}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def query(name):
    msg = struct.pack("!HHHHHH", 0, 0x0100, 1, 0, 0, 0)  # ID 0 (RFC 9250 4.2.1), RD
    for label in name.rstrip(".").split("."):
        msg += bytes([len(label)]) + label.encode()
    return msg + b"\x00" + struct.pack("!HH", 1, 1)  # A, IN


async def run(host, port, name, timeout, versions):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=ALPNS, verify_mode=ssl.CERT_NONE)
    cfg.supported_versions = versions
    out = {}
    async with connect(host, port, configuration=cfg) as client:
        quic = client._quic
        out["version"] = "draft-%d" % (quic._version & 0xFF) if quic._version >> 8 == 0xFF0000 else hex(quic._version)
        alpn = quic.tls.alpn_negotiated
        out["alpn"] = alpn or ""
        reader, writer = await client.create_stream()
        msg = query(name)
        prefixed = alpn not in UNPREFIXED
        writer.write((struct.pack("!H", len(msg)) if prefixed else b"") + msg)
        writer.write_eof()
        data = await asyncio.wait_for(reader.read(), timeout)
        if prefixed:
            data = data[2:]
        if len(data) < 12:
            raise ValueError("a %d-octet answer" % len(data))
        out["rcode"] = RCODES.get(data[3] & 0x0F, str(data[3] & 0x0F))
    return out


def main():
    host, port, name, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    versions = [int(v, 16) for v in sys.argv[5:]]
    try:
        out = asyncio.run(asyncio.wait_for(run(host, port, name, timeout, versions), timeout))
    except Exception as e:  # the verdict is the caller's
        out = {"error": "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
