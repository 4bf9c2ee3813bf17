// Command gendict trains a zstd dictionary for the store's raw records
// (store/zraw.go) from records, one JSON object per line, and prints what
// it saves, against zstd without a dictionary, on a fifth of them held out
// of the training. Dictionary 1 was
// trained on the records of a schema-7 store of every experiment's quick
// run and 480 DNS samples of every transport (docs/store.md):
//
//	sqlite3 old.db "SELECT raw FROM sample_raw UNION ALL SELECT raw FROM results" > records.jsonl
//	go run ./store/internal/gendict -codec 2 -out store/rawdict/2.zdict records.jsonl
//
// A dictionary in use never changes: records written with it are read
// with it. A new one is a new file and a new codec in zraw.go.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

func main() {
	out := flag.String("out", "", "the dictionary file to write")
	codec := flag.Int("codec", 0, "the codec number it will be (its zstd ID is 32768 plus it)")
	size := flag.Int("size", 64<<10, "the dictionary's size, octets")
	flag.Parse()
	if *out == "" || *codec < 1 || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: gendict -codec N -out FILE records.jsonl...")
		os.Exit(2)
	}
	var records [][]byte
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if len(sc.Bytes()) > 0 {
				records = append(records, append([]byte(nil), sc.Bytes()...))
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			fail(fmt.Errorf("%s: %w", name, err))
		}
	}
	// Every fifth record is held out: the figures are on records the
	// dictionary was not trained on.
	var train, held [][]byte
	for i, r := range records {
		if i%5 == 4 {
			held = append(held, r)
		} else {
			train = append(train, r)
		}
	}
	d, err := dict.BuildZstdDict(train, dict.Options{MaxDictSize: *size, HashBytes: 6, ZstdDictID: uint32(32768 + *codec)})
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, d, 0o644); err != nil {
		fail(err)
	}
	plain, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		fail(err)
	}
	withDict, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderDict(d))
	if err != nil {
		fail(err)
	}
	var in, alone, dicted int
	for _, r := range held {
		in += len(r)
		alone += len(plain.EncodeAll(r, nil))
		dicted += len(withDict.EncodeAll(r, nil))
	}
	n := float64(len(held))
	fmt.Printf("trained on %d records; on the %d held out, %.0f octets each: zstd alone %.0f (%.1f×), with the %d-octet dictionary %.0f (%.1f×)\n",
		len(train), len(held), float64(in)/n, float64(alone)/n, float64(in)/float64(alone), len(d), float64(dicted)/n, float64(in)/float64(dicted))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gendict:", err)
	os.Exit(1)
}
