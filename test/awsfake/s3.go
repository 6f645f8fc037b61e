package awsfake

// S3, as far as dlami-node-check's evidence upload needs it: buckets (made by the tests, each
// in a region) and the REST-XML calls PutObject, HeadBucket, GetObject and HeadObject,
// path-style (/bucket/key: what the SDK sends to an endpoint given as an IP address). Requests
// are SigV4-scoped to service s3 and to the bucket's region (a request signed for another
// region gets S3's AuthorizationHeaderMalformed, as S3 answers); the payload hash the SDK
// signs (x-amz-content-sha256), Content-MD5 and the flexible checksum headers
// (x-amz-checksum-crc32, -crc32c, -sha1, -sha256) are verified against the body, and
// aws-chunked bodies (streaming, with trailing checksums) are decoded. Objects keep their
// bytes, content type and user metadata (x-amz-meta-*) for the tests to read.

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// S3 operation names (faults and Calls use them).
const (
	OpPutObject  = "PutObject"
	OpHeadBucket = "HeadBucket"
	OpGetObject  = "GetObject"
	OpHeadObject = "HeadObject"
)

func s3Ops() []string { return []string{OpPutObject, OpHeadBucket, OpGetObject, OpHeadObject} }

// maxObject bounds one object the fake keeps.
const maxObject = 64 << 20

// S3Object is one stored object.
type S3Object struct {
	Bucket, Key  string
	Body         []byte
	ContentType  string
	Metadata     map[string]string // x-amz-meta-* without the prefix, keys lower-cased
	ETag         string            // quoted hex MD5, as S3 answers for a single-part upload
	LastModified time.Time
}

type s3Bucket struct {
	region  string
	objects map[string]*S3Object
}

// CreateBucket makes an empty bucket in region (tests call it; the node check never creates
// buckets). Making an existing one again empties nothing.
func (s *Server) CreateBucket(region, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fleet.buckets == nil {
		s.fleet.buckets = map[string]*s3Bucket{}
	}
	if s.fleet.buckets[name] == nil {
		s.fleet.buckets[name] = &s3Bucket{region: region, objects: map[string]*S3Object{}}
	}
}

// Object returns a copy of the object at bucket/key.
func (s *Server) Object(bucket, key string) (S3Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.fleet.buckets[bucket]
	if b == nil || b.objects[key] == nil {
		return S3Object{}, false
	}
	o := *b.objects[key]
	o.Body = append([]byte(nil), o.Body...)
	return o, true
}

// ObjectKeys lists bucket's keys, sorted.
func (s *Server) ObjectKeys(bucket string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.fleet.buckets[bucket]
	if b == nil {
		return nil
	}
	return sortedKeys(b.objects)
}

// s3Proto renders S3's REST-XML errors.
type s3Proto struct{}

func s3Error(status int, code, msg string, extra ...string) response {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>")
	_ = xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString("</Message>")
	for i := 0; i+1 < len(extra); i += 2 {
		b.WriteString("<" + extra[i] + ">")
		_ = xml.EscapeText(&b, []byte(extra[i+1]))
		b.WriteString("</" + extra[i] + ">")
	}
	b.WriteString("<RequestId>" + requestID() + "</RequestId></Error>")
	return response{status: status, contentType: "application/xml", body: b.String()}
}

func (s3Proto) throttle() response {
	return s3Error(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
}

func (s3Proto) serverError() response {
	return s3Error(http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
}

func (s3Proto) denied(string, string, string) response {
	return s3Error(http.StatusForbidden, "AccessDenied", "Access Denied")
}

func (s3Proto) malformed() response {
	return response{status: http.StatusOK, contentType: "application/xml", body: `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>`}
}

// isS3 reports whether r is signed for S3.
func isS3(r *http.Request) bool {
	scope, err := ParseCredentialScope(r.Header.Get("Authorization"))
	return err == nil && scope.Service == "s3"
}

// s3Request decodes one S3 call (path-style) into a request the fault machinery answers.
func (s *Server) s3Request(r *http.Request) (request, CredentialScope, error) {
	req := request{proto: s3Proto{}, resource: "*"}
	scope, err := ParseCredentialScope(r.Header.Get("Authorization"))
	if err != nil {
		return req, scope, &wireError{s3Error(http.StatusForbidden, "AuthorizationHeaderMalformed", err.Error())}
	}
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	rawBucket, rawKey, hasKey := strings.Cut(path, "/")
	bucket, err1 := url.PathUnescape(rawBucket)
	key, err2 := url.PathUnescape(rawKey)
	if err1 != nil || err2 != nil || bucket == "" {
		return req, scope, &wireError{s3Error(http.StatusBadRequest, "InvalidURI", "Couldn't parse the specified URI.")}
	}
	switch {
	case r.Method == http.MethodPut && hasKey && key != "":
		req.op = OpPutObject
	case r.Method == http.MethodHead && (!hasKey || key == ""):
		req.op = OpHeadBucket
	case r.Method == http.MethodGet && hasKey && key != "":
		req.op = OpGetObject
	case r.Method == http.MethodHead && hasKey && key != "":
		req.op = OpHeadObject
	default:
		return req, scope, &wireError{s3Error(http.StatusMethodNotAllowed, "MethodNotAllowed", "The fake S3 answers PutObject, HeadBucket, GetObject and HeadObject (path-style) only.")}
	}
	req.resource = "arn:aws:s3:::" + bucket
	if hasKey {
		req.resource += "/" + key
	}
	s.mu.Lock()
	b := s.fleet.buckets[bucket]
	s.mu.Unlock()
	if b == nil {
		if req.op == OpHeadBucket || req.op == OpHeadObject {
			return req, scope, &wireError{response{status: http.StatusNotFound, contentType: "application/xml"}}
		}
		return req, scope, &wireError{s3Error(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist", "BucketName", bucket)}
	}
	if scope.Region != b.region {
		return req, scope, &wireError{s3Error(http.StatusBadRequest, "AuthorizationHeaderMalformed",
			fmt.Sprintf("The authorization header is malformed; the region '%s' is wrong; expecting '%s'", scope.Region, b.region), "Region", b.region)}
	}
	switch req.op {
	case OpHeadBucket:
		req.handle = func() response {
			return response{status: http.StatusOK, header: http.Header{"X-Amz-Bucket-Region": {b.region}}}
		}
	case OpGetObject, OpHeadObject:
		head := req.op == OpHeadObject
		req.handle = func() response { return s.getObject(bucket, key, head) }
	case OpPutObject:
		obj, err := readPut(r, bucket, key)
		if err != nil {
			return req, scope, err
		}
		req.handle = func() response { return s.putObject(b, obj) }
	}
	return req, scope, nil
}

func (s *Server) getObject(bucket, key string, head bool) response {
	o, ok := s.Object(bucket, key)
	if !ok {
		if head {
			return response{status: http.StatusNotFound, contentType: "application/xml"}
		}
		return s3Error(http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", "Key", key)
	}
	h := http.Header{"Etag": {o.ETag}, "Content-Length": {strconv.Itoa(len(o.Body))}, "Last-Modified": {o.LastModified.UTC().Format(http.TimeFormat)}}
	for k, v := range o.Metadata {
		h.Set("X-Amz-Meta-"+k, v)
	}
	resp := response{status: http.StatusOK, contentType: o.ContentType, header: h}
	if !head {
		resp.body = string(o.Body)
	}
	return resp
}

func (s *Server) putObject(b *s3Bucket, o *S3Object) response {
	s.mu.Lock()
	o.LastModified = s.now()
	b.objects[o.Key] = o
	s.mu.Unlock()
	return response{status: http.StatusOK, header: http.Header{"Etag": {o.ETag}}}
}

// readPut reads a PutObject body and checks it against every hash the request carries.
func readPut(r *http.Request, bucket, key string) (*S3Object, error) {
	bad := func(code, format string, a ...any) error {
		return &wireError{s3Error(http.StatusBadRequest, code, fmt.Sprintf(format, a...))}
	}
	declared := r.Header.Get("X-Amz-Content-Sha256")
	if declared == "" {
		return nil, bad("InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxObject+1<<20))
	if err != nil {
		return nil, bad("IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header: %v", err)
	}
	body, trailers := raw, http.Header{}
	chunked := strings.HasPrefix(declared, "STREAMING-") || strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked")
	if chunked {
		if body, trailers, err = decodeAWSChunked(raw); err != nil {
			return nil, bad("InvalidRequest", "the aws-chunked body could not be read: %v", err)
		}
		if dl := r.Header.Get("X-Amz-Decoded-Content-Length"); dl != "" && dl != strconv.Itoa(len(body)) {
			return nil, bad("IncompleteBody", "x-amz-decoded-content-length %s, body %d bytes", dl, len(body))
		}
	} else if declared != "UNSIGNED-PAYLOAD" {
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != declared {
			return nil, bad("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
	}
	if len(body) > maxObject {
		return nil, bad("EntityTooLarge", "Your proposed upload exceeds the fake's maximum allowed size (%d bytes)", maxObject)
	}
	md := md5.Sum(body)
	if v := r.Header.Get("Content-Md5"); v != "" && v != base64.StdEncoding.EncodeToString(md[:]) {
		return nil, bad("BadDigest", "The Content-MD5 you specified did not match what we received.")
	}
	for name, h := range map[string]func() hash.Hash{
		"X-Amz-Checksum-Crc32":  func() hash.Hash { return crc32.NewIEEE() },
		"X-Amz-Checksum-Crc32c": func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
		"X-Amz-Checksum-Sha1":   sha1.New,
		"X-Amz-Checksum-Sha256": sha256.New,
	} {
		want := r.Header.Get(name)
		if want == "" {
			want = trailers.Get(name)
		}
		if want == "" {
			continue
		}
		sum := h()
		sum.Write(body)
		if base64.StdEncoding.EncodeToString(sum.Sum(nil)) != want {
			return nil, bad("BadDigest", "The %s you specified did not match the calculated checksum.", strings.ToLower(name))
		}
	}
	meta := map[string]string{}
	for k, v := range r.Header {
		if m, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-meta-"); ok && len(v) > 0 {
			meta[m] = v[0]
		}
	}
	return &S3Object{Bucket: bucket, Key: key, Body: body, ContentType: r.Header.Get("Content-Type"), Metadata: meta,
		ETag: `"` + hex.EncodeToString(md[:]) + `"`}, nil
}

// decodeAWSChunked reads an aws-chunked body: "HEXSIZE[;chunk-signature=...]\r\n" + data +
// "\r\n", ending with a zero-size chunk and the trailing headers ("name:value\r\n"), then
// "\r\n".
func decodeAWSChunked(raw []byte) ([]byte, http.Header, error) {
	rd := bufio.NewReader(bytes.NewReader(raw))
	var body []byte
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return nil, nil, errors.New("a chunk header ends early")
		}
		sizeText, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
		size, err := strconv.ParseUint(strings.TrimSpace(sizeText), 16, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("chunk size %q: %v", sizeText, err)
		}
		if size == 0 {
			break
		}
		if len(body)+int(size) > maxObject {
			return nil, nil, errors.New("chunks over the object limit")
		}
		chunk := make([]byte, size)
		if _, err := io.ReadFull(rd, chunk); err != nil {
			return nil, nil, fmt.Errorf("a chunk of %d bytes ends early", size)
		}
		body = append(body, chunk...)
		if crlf, err := rd.ReadString('\n'); err != nil || strings.TrimRight(crlf, "\r\n") != "" {
			return nil, nil, errors.New("a chunk is not followed by CRLF")
		}
	}
	trailers := http.Header{}
	for {
		line, err := rd.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, nil, fmt.Errorf("trailer %q", line)
		}
		trailers.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		if err != nil {
			break
		}
	}
	return body, trailers, nil
}
