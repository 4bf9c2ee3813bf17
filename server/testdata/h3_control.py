"""An independent reader of doxlab's HTTP/3 control stream: aioquic
(PyPI), a QUIC and HTTP/3 stack not written in Go.

It connects to host:port, lets aioquic's H3Connection take the server's
streams (it checks the control stream's rules and parses SETTINGS),
fetches / over the same connection, and decodes the control stream's
frames with aioquic's own varint buffer, ORIGIN entries per RFC 9412.
Prints one JSON object: the stream type, the frames' types in order, the
SETTINGS aioquic received, the origins, and the response's status.
"""
import asyncio
import json
import ssl
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import Buffer, BufferReadError
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived

ORIGIN = 0x0C


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.uni = {}  # server-initiated unidirectional streams' octets
        self.status = None
        self.closed = None
        self.answered = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.stream_id % 4 == 3:
            self.uni[event.stream_id] = self.uni.get(event.stream_id, b"") + event.data
        if isinstance(event, ConnectionTerminated):
            self.closed = [event.error_code, event.reason_phrase]
            if not self.answered.done():
                self.answered.set_result(None)
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                self.status = dict(e.headers).get(b":status", b"").decode()
                if not self.answered.done():
                    self.answered.set_result(None)


def frames(data):
    """The stream type, then (type, payload) per frame, read with aioquic's
    varint buffer."""
    buf = Buffer(data=data)
    stream_type = buf.pull_uint_var()
    out = []
    while not buf.eof():
        try:
            typ = buf.pull_uint_var()
            length = buf.pull_uint_var()
            out.append((typ, buf.pull_bytes(length)))
        except BufferReadError:
            break  # a frame not yet whole
    return stream_type, out


def origin_entries(payload):
    buf = Buffer(data=payload)
    out = []
    while not buf.eof():
        n = buf.pull_uint16()
        out.append(buf.pull_bytes(n).decode("ascii"))
    return out


async def main(host, port, ca):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    config.load_verify_locations(ca)
    config.verify_mode = ssl.CERT_REQUIRED
    async with connect(host, port, configuration=config, create_protocol=Client) as client:
        sid = client._quic.get_next_available_stream_id()
        client.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"localhost"), (b":path", b"/")], end_stream=True)
        client.transmit()
        await asyncio.wait_for(client.answered, 5)
        control = None
        for data in client.uni.values():
            stream_type, fs = frames(data)
            if stream_type == 0:
                control = fs
        result = {
            "closed": client.closed,
            "status": client.status,
            "settings": {str(k): v for k, v in (client.h3.received_settings or {}).items()},
            "frames": [t for t, _ in control or []],
            "origins": [o for t, p in control or [] if t == ORIGIN for o in origin_entries(p)],
        }
        print(json.dumps(result))


if __name__ == "__main__":
    host, port, ca = sys.argv[1:4]
    asyncio.run(main(host, int(port), ca))
