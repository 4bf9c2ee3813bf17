package store

import (
	"database/sql"
	"encoding/binary"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// TestPGSetterDecodesWhatPostgreSQLSends: each column type a scan reads,
// in the binary format pgx asks for and in text (a simple-protocol
// connection's), NULLs as the scans always took them, and a column of
// another type refused before any row, naming it.
func TestPGSetterDecodesWhatPostgreSQLSends(t *testing.T) {
	types := pgtype.NewMap()
	be := func(n int, v uint64) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, v)
		return b[8-n:]
	}
	col := func(oid uint32, format int16) pgconn.FieldDescription {
		return pgconn.FieldDescription{Name: "c", DataTypeOID: oid, Format: format}
	}
	bin, txt := int16(pgx.BinaryFormatCode), int16(pgx.TextFormatCode)
	for _, c := range []struct {
		name string
		fd   pgconn.FieldDescription
		in   []byte
		dst  any
		want any
	}{
		{"int8", col(pgtype.Int8OID, bin), be(8, math.MaxUint64-41), new(int64), int64(-42)},
		{"int4", col(pgtype.Int4OID, bin), be(4, 1<<32-7), new(int64), int64(-7)},
		{"int2", col(pgtype.Int2OID, bin), be(2, 513), new(int64), int64(513)},
		{"int8 as text", col(pgtype.Int8OID, txt), []byte("-9"), new(int64), int64(-9)},
		{"NULL integer", col(pgtype.Int8OID, bin), nil, new(int64), int64(0)},
		{"float8", col(pgtype.Float8OID, bin), be(8, math.Float64bits(2.5)), new(sql.NullFloat64), sql.NullFloat64{Float64: 2.5, Valid: true}},
		{"float4", col(pgtype.Float4OID, bin), be(4, uint64(math.Float32bits(0.25))), new(sql.NullFloat64), sql.NullFloat64{Float64: 0.25, Valid: true}},
		{"float8 as text", col(pgtype.Float8OID, txt), []byte("1e-3"), new(sql.NullFloat64), sql.NullFloat64{Float64: 0.001, Valid: true}},
		{"an integer as a float", col(pgtype.Int8OID, bin), be(8, 3), new(sql.NullFloat64), sql.NullFloat64{Float64: 3, Valid: true}},
		{"NULL float", col(pgtype.Float8OID, bin), nil, &sql.NullFloat64{Float64: 1, Valid: true}, sql.NullFloat64{}},
		{"bool", col(pgtype.BoolOID, bin), []byte{1}, new(bool), true},
		{"bool as text", col(pgtype.BoolOID, txt), []byte("f"), new(bool), false},
		{"text", col(pgtype.TextOID, txt), []byte("doq"), new(string), "doq"},
		{"NULL text", col(pgtype.TextOID, txt), nil, new(sql.NullString), sql.NullString{}},
		{"varchar, nullable", col(pgtype.VarcharOID, txt), []byte("fra"), new(sql.NullString), sql.NullString{String: "fra", Valid: true}},
		{"bytea", col(pgtype.ByteaOID, bin), []byte{0, 0xff}, new([]byte), []byte{0, 0xff}},
		{"bytea as text", col(pgtype.ByteaOID, txt), []byte(`\x00ff`), new([]byte), []byte{0, 0xff}},
		{"empty bytea", col(pgtype.ByteaOID, bin), []byte{}, new([]byte), []byte{}},
	} {
		set, err := pgSetter(c.fd, types, c.dst)
		require.NoError(t, err, c.name)
		require.NoError(t, set(c.in), c.name)
		require.Equal(t, c.want, deref(c.dst), c.name)
	}

	for _, c := range []struct {
		fd   pgconn.FieldDescription
		dst  any
		want string
	}{
		{col(pgtype.TextOID, txt), new(int64), "column c: text where an integer was expected"},
		{col(pgtype.Int8OID, bin), new(string), "column c: int8 where text was expected"},
		{col(pgtype.NumericOID, bin), new(sql.NullFloat64), "column c: numeric where a number was expected"},
		{col(pgtype.Int4OID, bin), new(bool), "column c: int4 where a boolean was expected"},
		{col(pgtype.Float8OID, bin), new([]byte), "column c: float8 where binary data was expected"},
		{col(999999, bin), new(string), "column c: type 999999 where text was expected"},
	} {
		_, err := pgSetter(c.fd, types, c.dst)
		require.EqualError(t, err, c.want)
	}

	// A value that cannot be its type's fails the row, naming the column.
	for _, c := range []struct {
		fd  pgconn.FieldDescription
		in  []byte
		dst any
	}{
		{col(pgtype.Int8OID, bin), []byte{1, 2, 3}, new(int64)},
		{col(pgtype.Float8OID, bin), []byte{1}, new(sql.NullFloat64)},
		{col(pgtype.BoolOID, bin), nil, new(bool)},
		{col(pgtype.ByteaOID, txt), []byte("00ff"), new([]byte)},
		{col(pgtype.Int8OID, txt), []byte("x"), new(int64)},
	} {
		set, err := pgSetter(c.fd, types, c.dst)
		require.NoError(t, err)
		require.Error(t, set(c.in), "%v %q", c.fd, c.in)
	}
}

func deref(p any) any {
	switch p := p.(type) {
	case *int64:
		return *p
	case *sql.NullFloat64:
		return *p
	case *bool:
		return *p
	case *string:
		return *p
	case *sql.NullString:
		return *p
	case *[]byte:
		return *p
	}
	panic("deref: no case for this type")
}
