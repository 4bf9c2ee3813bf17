package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgSource reads a PostgreSQL query through pgx's own interface: each
// value as the server sent it (numbers in binary), decoded here by its
// column's type. database/sql's driver boxed every value in an interface
// and the store took it out again, a third of an export's time. A column's
// type is PostgreSQL's for the whole query, so it is checked once, before
// the first row.
type pgSource struct {
	rows pgx.Rows
	set  []func(b []byte) error
}

// queryPG runs q on c as a rowSource.
func queryPG(ctx context.Context, c *pgx.Conn, q string, args []any) func(dest []any) (rowSource, error) {
	return func(dest []any) (rowSource, error) {
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		fds := rows.FieldDescriptions()
		if len(fds) != len(dest) {
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("the query gave %d columns where %d were asked", len(fds), len(dest))
		}
		src := &pgSource{rows: rows}
		for i, d := range dest {
			set, err := pgSetter(fds[i], c.TypeMap(), d)
			if err != nil {
				rows.Close()
				return nil, err
			}
			src.set = append(src.set, set)
		}
		return src, nil
	}
}

func (q *pgSource) next() (bool, error) {
	if !q.rows.Next() {
		return false, q.rows.Err()
	}
	vals := q.rows.RawValues()
	for i, set := range q.set {
		if err := set(vals[i]); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (q *pgSource) close() error {
	q.rows.Close()
	return q.rows.Err()
}

// pgSetter sets dst, one of scanned's fields, from the values of column
// fd (nil for NULL, in fd's format), refusing a column of another type
// than the field's, naming it.
func pgSetter(fd pgconn.FieldDescription, types *pgtype.Map, dst any) (func(b []byte) error, error) {
	bin := fd.Format == pgx.BinaryFormatCode
	wrong := func(want string) error {
		name := fmt.Sprintf("type %d", fd.DataTypeOID)
		if t, ok := types.TypeForOID(fd.DataTypeOID); ok {
			name = t.Name
		}
		return fmt.Errorf("column %s: %s where %s was expected", fd.Name, name, want)
	}
	malformed := func(b []byte) error {
		return fmt.Errorf("column %s: a malformed value (%d octets)", fd.Name, len(b))
	}
	// integer decodes a value of an integer column (nil for another
	// column), its width and decoding picked once, not asked each value.
	var integer func(b []byte) (int64, error)
	if it, ok := map[uint32]struct {
		width int
		of    func([]byte) int64
	}{
		pgtype.Int8OID: {8, func(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }},
		pgtype.Int4OID: {4, func(b []byte) int64 { return int64(int32(binary.BigEndian.Uint32(b))) }},
		pgtype.Int2OID: {2, func(b []byte) int64 { return int64(int16(binary.BigEndian.Uint16(b))) }},
	}[fd.DataTypeOID]; ok {
		integer = func(b []byte) (int64, error) {
			if len(b) != it.width {
				return 0, malformed(b)
			}
			return it.of(b), nil
		}
		if !bin {
			integer = func(b []byte) (int64, error) { return strconv.ParseInt(string(b), 10, 64) }
		}
	}
	textual := fd.DataTypeOID == pgtype.TextOID || fd.DataTypeOID == pgtype.VarcharOID || fd.DataTypeOID == pgtype.BPCharOID || fd.DataTypeOID == pgtype.NameOID

	switch d := dst.(type) {
	case *string, *sql.NullString:
		if !textual && fd.DataTypeOID != pgtype.ByteaOID {
			return nil, wrong("text")
		}
		var t interned
		if s, ok := d.(*string); ok {
			return func(b []byte) error { *s = t.of(b); return nil }, nil
		}
		ns := d.(*sql.NullString)
		return func(b []byte) error {
			ns.String, ns.Valid = t.of(b), b != nil
			return nil
		}, nil
	case *int64:
		if integer == nil {
			return nil, wrong("an integer")
		}
		return func(b []byte) (err error) {
			*d = 0
			if b != nil {
				*d, err = integer(b)
			}
			return err
		}, nil
	case *bool:
		if fd.DataTypeOID != pgtype.BoolOID {
			return nil, wrong("a boolean")
		}
		return func(b []byte) error {
			if b == nil {
				return fmt.Errorf("column %s: NULL where a boolean was expected", fd.Name)
			}
			if len(b) != 1 {
				return malformed(b)
			}
			*d = b[0] == 1 || b[0] == 't'
			return nil
		}, nil
	case *sql.NullFloat64:
		var float func(b []byte) (float64, error)
		switch {
		case integer != nil:
			float = func(b []byte) (float64, error) { n, err := integer(b); return float64(n), err }
		case fd.DataTypeOID != pgtype.Float8OID && fd.DataTypeOID != pgtype.Float4OID:
			return nil, wrong("a number")
		case !bin:
			float = func(b []byte) (float64, error) { return strconv.ParseFloat(string(b), 64) }
		case fd.DataTypeOID == pgtype.Float8OID:
			float = func(b []byte) (float64, error) {
				if len(b) != 8 {
					return 0, malformed(b)
				}
				return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
			}
		default:
			float = func(b []byte) (float64, error) {
				if len(b) != 4 {
					return 0, malformed(b)
				}
				return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
			}
		}
		return func(b []byte) (err error) {
			*d = sql.NullFloat64{}
			if b != nil {
				d.Float64, err = float(b)
				d.Valid = err == nil
			}
			return err
		}, nil
	case *[]byte:
		switch {
		case textual || (bin && fd.DataTypeOID == pgtype.ByteaOID):
			return func(b []byte) error {
				if b == nil {
					return fmt.Errorf("column %s: NULL where binary data was expected", fd.Name)
				}
				*d = bytes.Clone(b)
				return nil
			}, nil
		case fd.DataTypeOID == pgtype.ByteaOID: // as text: \x and hex digits
			return func(b []byte) error {
				h, ok := bytes.CutPrefix(b, []byte(`\x`))
				if !ok {
					return malformed(b)
				}
				*d = make([]byte, hex.DecodedLen(len(h)))
				if _, err := hex.Decode(*d, h); err != nil {
					return malformed(b)
				}
				return nil
			}, nil
		}
		return nil, wrong("binary data")
	}
	return nil, fmt.Errorf("no way to assign %T", dst)
}
