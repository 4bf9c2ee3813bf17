"""A DoQ server on a QUIC draft with a draft ALPN (aioquic 0.9.25), for
doxlab's verify tests: it answers every query NOERROR with no records.
Usage: python doq_draft_server.py HOST PORT CERT KEY VERSION ALPN"""
import asyncio
import struct
import sys

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

UNPREFIXED = {"doq-i00", "doq-i01", "doq-i02"}


class Proto(QuicConnectionProtocol):
    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.end_stream:
            prefixed = self._quic.tls.alpn_negotiated not in UNPREFIXED
            q = event.data[2:] if prefixed else event.data
            a = q[:2] + bytes([0x80 | (q[2] & 0x79), 0x00]) + q[4:]  # QR set, NOERROR
            self._quic.send_stream_data(event.stream_id, (struct.pack("!H", len(a)) if prefixed else b"") + a, end_stream=True)


async def main():
    host, port, cert, key, version, alpn = sys.argv[1:7]
    cfg = QuicConfiguration(is_client=False, alpn_protocols=[alpn])
    cfg.supported_versions = [int(version, 16)]
    cfg.load_cert_chain(cert, key)
    await serve(host, int(port), configuration=cfg, create_protocol=Proto)
    print("ready", flush=True)
    await asyncio.Future()


asyncio.run(main())
