package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/doxlab/doxlab/internal/h3ext"
	"github.com/klauspost/compress/gzhttp"
)

// serveWeb serves page snapshots per virtual host over HTTP/3 (UDP) and
// HTTP/2 (TCP) on the same port, gzip-compressed, announcing HTTP/3 with
// Alt-Svc. The DoH endpoint is there too, so DNS and web can share one
// QUIC connection.
func (s *Server) serveWeb(addr string) error {
	roots := map[string]http.Handler{}
	for host, dir := range s.cfg.Web.Roots {
		// os.Root keeps every open inside the site: a symlink or ".."
		// that leads out of it fails.
		root, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("web root %s: %w", dir, err)
		}
		s.track("web-root", nil, root)
		roots[strings.ToLower(host)] = http.FileServerFS(noListing{root.FS()})
	}
	pages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		h, ok := roots[host]
		if !ok {
			h, ok = roots["*"]
		}
		if !ok {
			http.Error(w, "no site for "+host, http.StatusNotFound)
			return
		}
		// A page on another origin may use this resource where CORS
		// applies (fonts, fetch) and sees its DNS, connection and request
		// timing, as font services, CDNs and third parties allow.
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Timing-Allow-Origin", "*")
		h.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	s.handleDoH(mux, "web")
	mux.Handle("/", gzhttp.GzipHandler(pages))
	host, port, err := sharedPort(addr)
	if err != nil {
		return err
	}
	if err := s.serveHTTP3("web", net.JoinHostPort(host, fmt.Sprint(port)), mux, true); err != nil {
		return err
	}
	var h http.Handler = mux
	if !s.cfg.Web.NoAltSvc {
		altSvc := fmt.Sprintf(`h3=":%d"; ma=86400`, port)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Alt-Svc", altSvc)
			mux.ServeHTTP(w, r)
		})
	}
	at := net.JoinHostPort(host, fmt.Sprint(port))
	return s.serveHTTPS("web-tcp", at, h, true, s.webOrigins(at))
}

// webOrigins are the origins the web listener at addr announces in its
// ORIGIN frames, on HTTP/3 and HTTP/2 alike: web.origins, else every
// host of web.roots but "*" on the listener's port, sorted; none with
// web.no_origin.
func (s *Server) webOrigins(addr string) []string {
	if s.cfg.Web.NoOrigin {
		return nil
	}
	if len(s.cfg.Web.Origins) > 0 {
		return s.cfg.Web.Origins
	}
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	var origins []string
	for host := range s.cfg.Web.Roots {
		if host != "*" {
			origins = append(origins, h3ext.Origin(host, p))
		}
	}
	slices.Sort(origins)
	return origins
}

// noListing serves a directory only through its index.html: a directory
// without one is not found, never listed.
type noListing struct{ fs.FS }

func (n noListing) Open(name string) (fs.File, error) {
	f, err := n.FS.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, err
		}
		return nil, fs.ErrNotExist // a path out of the root is not there, not a server error
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		if _, err := fs.Stat(n.FS, path.Join(name, "index.html")); err != nil {
			f.Close()
			return nil, fs.ErrNotExist
		}
	}
	return f, nil
}

// quietLog drops net/http's per-connection error logs (TLS handshake
// errors from scanners and fuzzers); the records carry what matters.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// sharedPort returns the host and a port free on both UDP and TCP: HTTP/3
// and HTTP/2 share the number, so Alt-Svc can point at it. A fixed port is
// returned as it is; port 0 is resolved by trying ports the kernel offers.
func sharedPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if p != "0" {
		port, err := net.LookupPort("udp", p)
		return host, port, err
	}
	for range 50 {
		u, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", 0, err
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		t, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
		u.Close()
		if err == nil {
			t.Close()
			return host, port, nil
		}
	}
	return "", 0, fmt.Errorf("no port free on both UDP and TCP")
}
