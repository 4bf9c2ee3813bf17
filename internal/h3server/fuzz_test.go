package h3server

import (
	"bytes"
	"errors"
	"testing"

	"github.com/quic-go/qpack"
)

// FuzzRequestHeaders is a hostile client's header section: whatever the
// octets, decoding and building the request end in a request or in an
// error that says how to end the stream or the connection (a QPACK
// failure), never a panic; a request has a method and a URL.
func FuzzRequestHeaders(f *testing.F) {
	var good bytes.Buffer
	enc := qpack.NewEncoder(&good)
	for _, hf := range get("/index.html", qpack.HeaderField{Name: "cookie", Value: "a=1"}, qpack.HeaderField{Name: "content-length", Value: "3"}) {
		enc.WriteField(hf)
	}
	f.Add(good.Bytes())
	f.Add([]byte{0x00, 0x00, 0xd1})       // :method GET by index, nothing else
	f.Add([]byte{0x00, 0x00, 0x2f, 0xff}) // a literal name cut short
	f.Add([]byte{0x01, 0x00})             // a dynamic table reference without a table
	f.Fuzz(func(t *testing.T, block []byte) {
		c := &Conn{cfg: &Config{MaxHeaderBytes: 1 << 10}, dec: qpack.NewDecoder()}
		fields, err := c.decode(block)
		if err != nil {
			var ce *connError
			if !errors.As(err, &ce) && !errors.Is(err, errHeaderTooLarge) {
				t.Fatalf("decode: an error of no known kind: %v", err)
			}
			return
		}
		req, err := c.newRequest(fields)
		if err != nil {
			var se *streamError
			if !errors.As(err, &se) {
				t.Fatalf("newRequest: an error of no known kind: %v", err)
			}
			return
		}
		if req.Method == "" || req.URL == nil {
			t.Fatalf("a request without a method or URL: %+v", req)
		}
	})
}
