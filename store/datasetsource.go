package store

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// A dataset is read from a directory or from an S3-compatible bucket
// (s3://BUCKET/PREFIX): the same files, the manifest first. Writing is
// local; a dataset is copied to object storage whole (aws s3 sync,
// rclone), as its files never change.

// source is where a dataset's files are read from.
type source interface {
	open(ctx context.Context, name string) (readFile, error) // name: from the dataset's root, with /
}

// readFile is a file of a dataset, read in order or at offsets (a
// Parquet file's footer first).
type readFile interface {
	io.Reader
	io.ReaderAt
	io.Closer
	Size() int64
}

// dirSource is a dataset in a directory.
type dirSource string

type osFile struct {
	*os.File
	size int64
}

func (f osFile) Size() int64 { return f.size }

func (d dirSource) open(_ context.Context, name string) (readFile, error) {
	f, err := os.Open(filepath.Join(string(d), filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return osFile{f, st.Size()}, nil
}

// s3Source is a dataset under a prefix of a bucket.
type s3Source struct {
	c              *minio.Client
	bucket, prefix string
}

type s3File struct {
	*minio.Object
	size int64
}

func (f s3File) Size() int64 { return f.size }

func (s s3Source) open(ctx context.Context, name string) (readFile, error) {
	key := path.Join(s.prefix, name)
	obj, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, fmt.Errorf("s3://%s/%s: %w", s.bucket, key, os.ErrNotExist)
		}
		return nil, fmt.Errorf("s3://%s/%s: %w", s.bucket, key, err)
	}
	return s3File{obj, st.Size}, nil
}

// newS3Source is the source of an s3://BUCKET/PREFIX location. The
// endpoint and credentials are the AWS tools' environment:
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (an S3-compatible store, its
// scheme saying whether TLS; default AWS itself), AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION; without keys the
// bucket is read anonymously.
func newS3Source(loc string) (s3Source, error) {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return s3Source{}, fmt.Errorf("dataset %s: want s3://BUCKET/PREFIX", loc)
	}
	endpoint, secure := "s3.amazonaws.com", true
	if e := cmp.Or(os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL")); e != "" {
		eu, err := url.Parse(e)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return s3Source{}, fmt.Errorf("dataset %s: AWS_ENDPOINT_URL %q: want http://HOST[:PORT] or https://HOST[:PORT]", loc, e)
		}
		endpoint, secure = eu.Host, eu.Scheme == "https"
	}
	creds := credentials.NewEnvAWS()
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_ACCESS_KEY") == "" {
		creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	}
	c, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))})
	if err != nil {
		return s3Source{}, fmt.Errorf("dataset %s: %w", loc, err)
	}
	return s3Source{c: c, bucket: u.Host, prefix: strings.Trim(u.Path, "/")}, nil
}

// readAll reads a small file whole (the manifest), at most max octets.
func readAll(ctx context.Context, src source, name string, max int64) ([]byte, error) {
	f, err := src.open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Size() > max {
		return nil, fmt.Errorf("%s: %d octets, more than a manifest takes (%d)", name, f.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max)) // io.ReadAll ends at io.EOF without error
}
