// Package sqliteread reads a SQLite database straight through SQLite's C
// API, as modernc.org/sqlite transpiles it to Go, for the store's large
// scans.
//
// database/sql's driver for the same library opens every connection with
// SQLITE_OPEN_FULLMUTEX, so each value read takes the connection's mutex
// (a pthread mutex emulated in Go) twice, and boxes the value in an
// interface: reading ten million samples spent two thirds of its time
// there. A Conn here is opened with SQLITE_OPEN_NOMUTEX and hands values
// as they are typed; SQLite itself, its file locks and WAL snapshots, is
// the same.
package sqliteread

import (
	"errors"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// Conn is one connection for reading. It is not safe for concurrent use:
// one goroutine at a time, which is what NOMUTEX asks.
type Conn struct {
	tls *libc.TLS
	db  uintptr
}

// Open opens the database at uri (a SQLite URI filename: "file:" and a
// path, parameters SQLite does not know ignored, as the driver's DSN) for
// reading, waiting up to busy for a lock another connection holds.
func Open(uri string, busy time.Duration) (*Conn, error) {
	c := &Conn{tls: libc.NewTLS()}
	name, err := libc.CString(uri)
	if err != nil {
		c.tls.Close()
		return nil, err
	}
	defer libc.Xfree(c.tls, name)
	pp := libc.Xmalloc(c.tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if pp == 0 {
		c.tls.Close()
		return nil, errors.New("sqlite: out of memory")
	}
	defer libc.Xfree(c.tls, pp)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, pp, sqlite3.SQLITE_OPEN_READONLY|sqlite3.SQLITE_OPEN_NOMUTEX|sqlite3.SQLITE_OPEN_URI, 0)
	c.db = *(*uintptr)(cmem(pp))
	if rc != sqlite3.SQLITE_OK {
		err := c.errorOf(rc)
		c.Close()
		return nil, err
	}
	sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, int32(busy/time.Millisecond))
	return c, nil
}

// Close closes the connection, its statements finalized first.
func (c *Conn) Close() error {
	var err error
	if c.db != 0 {
		if rc := sqlite3.Xsqlite3_close_v2(c.tls, c.db); rc != sqlite3.SQLITE_OK {
			err = c.errorOf(rc)
		}
		c.db = 0
	}
	if c.tls != nil {
		c.tls.Close()
		c.tls = nil
	}
	return err
}

// errorOf is rc as an error, with the connection's message.
func (c *Conn) errorOf(rc int32) error {
	msg := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	if c.db != 0 {
		msg = libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
	}
	return fmt.Errorf("sqlite: %s (%d)", msg, rc)
}

// Rows are a query's rows, read one at a time with Next.
type Rows struct {
	c      *Conn
	stmt   uintptr
	texts  []uintptr // bound text arguments, freed at Close
	err    error
	done   bool
	closed bool
}

// Query runs q with args bound to its parameters in order: integers of
// any Go type (an int, a length) as SQLite's, and text (a string, or a
// type whose kind is one, as store.Kind). The caller must Close the rows.
func (c *Conn) Query(q string, args ...any) (*Rows, error) {
	zq, err := libc.CString(q)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, zq)
	pp := libc.Xmalloc(c.tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if pp == 0 {
		return nil, errors.New("sqlite: out of memory")
	}
	defer libc.Xfree(c.tls, pp)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, zq, -1, pp, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.errorOf(rc)
	}
	r := &Rows{c: c, stmt: *(*uintptr)(cmem(pp))}
	for i, a := range args {
		var rc int32
		switch v := reflect.ValueOf(a); {
		case v.CanInt():
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, r.stmt, int32(i+1), v.Int())
		case v.Kind() == reflect.String:
			p, err := libc.CString(v.String())
			if err != nil {
				r.Close()
				return nil, err
			}
			r.texts = append(r.texts, p)
			rc = sqlite3.Xsqlite3_bind_text(c.tls, r.stmt, int32(i+1), p, int32(v.Len()), 0)
		default:
			r.Close()
			return nil, fmt.Errorf("sqlite: argument %d: %T is neither int64 nor string", i+1, a)
		}
		if rc != sqlite3.SQLITE_OK {
			err := c.errorOf(rc)
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Next moves to the next row: false at the end or on an error (Err).
func (r *Rows) Next() bool {
	if r.done || r.closed {
		return false
	}
	switch rc := sqlite3.Xsqlite3_step(r.c.tls, r.stmt); rc {
	case sqlite3.SQLITE_ROW:
		return true
	case sqlite3.SQLITE_DONE:
	default:
		r.err = r.c.errorOf(rc)
	}
	r.done = true
	return false
}

// Err is the error that ended Next, if any.
func (r *Rows) Err() error { return r.err }

// Close finalizes the query.
func (r *Rows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	sqlite3.Xsqlite3_finalize(r.c.tls, r.stmt)
	for _, p := range r.texts {
		libc.Xfree(r.c.tls, p)
	}
	return nil
}

// The types of a value (Value.Type).
const (
	Integer = sqlite3.SQLITE_INTEGER
	Float   = sqlite3.SQLITE_FLOAT
	Text    = sqlite3.SQLITE_TEXT
	Blob    = sqlite3.SQLITE_BLOB
	Null    = sqlite3.SQLITE_NULL
)

// Name is column i's name: the expression's text where it is no
// column.
func (r *Rows) Name(i int) string {
	return libc.GoString(sqlite3.Xsqlite3_column_name(r.c.tls, r.stmt, int32(i)))
}

// Value is column i's value in the current row, valid until the next
// Next or Close. Each sqlite3_column_* call finds the column and checks
// the statement afterwards; a value's type and contents are read from
// one such call (sqlite3_column_value) instead of two or three: a tenth
// of an export's time. SQLite calls it unprotected, which matters only
// to a connection shared between threads, and a Conn is not.
func (r *Rows) Value(i int) Value {
	return Value{r.c.tls, sqlite3.Xsqlite3_column_value(r.c.tls, r.stmt, int32(i))}
}

// Value is one value of a row (Rows.Value).
type Value struct {
	tls *libc.TLS
	p   uintptr
}

// Type is the value's type.
func (v Value) Type() int { return int(sqlite3.Xsqlite3_value_type(v.tls, v.p)) }

// Int64 is the value as an integer (0 for NULL).
func (v Value) Int64() int64 { return sqlite3.Xsqlite3_value_int64(v.tls, v.p) }

// Float64 is the value as a float (0 for NULL).
func (v Value) Float64() float64 { return sqlite3.Xsqlite3_value_double(v.tls, v.p) }

// Bytes is the value as text or a blob, in SQLite's memory: valid until
// the next Next or Close, so copy what is kept.
func (v Value) Bytes() []byte {
	p := sqlite3.Xsqlite3_value_blob(v.tls, v.p)
	n := sqlite3.Xsqlite3_value_bytes(v.tls, v.p)
	if p == 0 || n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(cmem(p)), n)
}

// cmem is SQLite's memory at p as a pointer. It lives in modernc libc's
// allocator, outside Go's heap, so the rule go vet checks on turning a
// uintptr into a pointer (the garbage collector must know every pointer
// to its memory) does not concern it.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
