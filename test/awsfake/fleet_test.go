package awsfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const s3Auth = "AWS4-HMAC-SHA256 Credential=AKIDFAKE/20261201/us-west-2/s3/aws4_request, SignedHeaders=host, Signature=0"

func sha(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// put sends a PutObject the way the wire carries it, with the given headers.
func put(t *testing.T, srvURL, path, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srvURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", s3Auth)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestS3Wire: the fake checks what S3 checks of a PutObject (the signed payload hash,
// Content-MD5, the flexible checksums, aws-chunked bodies with trailing checksums, the
// bucket's region) and answers in S3's REST-XML shapes.
func TestS3Wire(t *testing.T) {
	s := New()
	srv := s.Start()
	defer srv.Close()
	s.CreateBucket("us-west-2", "gpu-evidence")
	s.CreateBucket("eu-west-1", "elsewhere")
	body := "evidence"
	for _, c := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		code             string
	}{
		{"signed payload", "/gpu-evidence/a", body, map[string]string{"X-Amz-Content-Sha256": sha(body), "X-Amz-Checksum-Crc32": "DGFXEA=="}, 200, ""},
		{"payload hash mismatch", "/gpu-evidence/a", body, map[string]string{"X-Amz-Content-Sha256": sha("other")}, 400, "XAmzContentSHA256Mismatch"},
		{"no payload hash", "/gpu-evidence/a", body, nil, 400, "InvalidRequest"},
		{"bad crc32", "/gpu-evidence/a", body, map[string]string{"X-Amz-Content-Sha256": sha(body), "X-Amz-Checksum-Crc32": "AAAAAA=="}, 400, "BadDigest"},
		{"bad Content-MD5", "/gpu-evidence/a", body, map[string]string{"X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD", "Content-Md5": "AAAAAAAAAAAAAAAAAAAAAA=="}, 400, "BadDigest"},
		{"aws-chunked with a trailing checksum", "/gpu-evidence/b", "8\r\nevidence\r\n0\r\nx-amz-checksum-crc32:DGFXEA==\r\n\r\n",
			map[string]string{"X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": "8", "X-Amz-Trailer": "x-amz-checksum-crc32"}, 200, ""},
		{"aws-chunked with a wrong trailing checksum", "/gpu-evidence/b", "8\r\nevidence\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
			map[string]string{"X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked"}, 400, "BadDigest"},
		{"no such bucket", "/nope/a", body, map[string]string{"X-Amz-Content-Sha256": sha(body)}, 404, "NoSuchBucket"},
		{"another region's bucket", "/elsewhere/a", body, map[string]string{"X-Amz-Content-Sha256": sha(body)}, 400, "AuthorizationHeaderMalformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, got := put(t, srv.URL, c.path, c.body, c.hdr)
			if resp.StatusCode != c.status || (c.code != "" && !strings.Contains(got, "<Code>"+c.code+"</Code>")) {
				t.Errorf("HTTP %d %s, want %d %s", resp.StatusCode, got, c.status, c.code)
			}
			if c.status == 200 && resp.Header.Get("Etag") == "" {
				t.Error("no ETag")
			}
		})
	}
	for _, key := range []string{"a", "b"} {
		if o, ok := s.Object("gpu-evidence", key); !ok || string(o.Body) != body {
			t.Errorf("object %s: %v %q", key, ok, o.Body)
		}
	}
	// HeadBucket answers the bucket's region; a missing bucket is a bodiless 404.
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/gpu-evidence", nil)
	req.Header.Set("Authorization", s3Auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Amz-Bucket-Region") != "us-west-2" {
		t.Errorf("HeadBucket: %v %+v", err, resp)
	}
	s.SetFault(OpPutObject, "", Fault{Throttle: 1})
	if resp, got := put(t, srv.URL, "/gpu-evidence/c", body, map[string]string{"X-Amz-Content-Sha256": sha(body)}); resp.StatusCode != 503 || !strings.Contains(got, "SlowDown") {
		t.Errorf("throttled: %d %s", resp.StatusCode, got)
	}
	if _, _, f, err := ParseFault("PutObject=denied"); err != nil || !f.AccessDenied {
		t.Errorf("a fault on PutObject: %v", err)
	}
}

// TestAutoScalingWire: the query API's answers and errors as the API reference gives them.
func TestAutoScalingWire(t *testing.T) {
	s := New()
	srv := s.Start()
	defer srv.Close()
	s.PutAutoScalingGroup("us-west-2", "p5-workers", "i-0aaa")
	call := func(form url.Values, service string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDFAKE/20261201/us-west-2/"+service+"/aws4_request, SignedHeaders=host, Signature=0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	v := func(kv ...string) url.Values {
		f := url.Values{"Version": {"2011-01-01"}}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	for _, c := range []struct {
		name    string
		form    url.Values
		service string
		status  int
		want    string
	}{
		{"describe a member and a stranger", v("Action", "DescribeAutoScalingInstances", "InstanceIds.member.1", "i-0aaa", "InstanceIds.member.2", "i-0zzz"), "autoscaling", 200,
			"<AutoScalingInstances><member><InstanceId>i-0aaa</InstanceId><AutoScalingGroupName>p5-workers</AutoScalingGroupName>"},
		{"the stranger alone: an empty list", v("Action", "DescribeAutoScalingInstances", "InstanceIds.member.1", "i-0zzz"), "autoscaling", 200, "<AutoScalingInstances></AutoScalingInstances>"},
		{"set health of a stranger", v("Action", "SetInstanceHealth", "InstanceId", "i-0zzz", "HealthStatus", "Unhealthy"), "autoscaling", 400, "<Code>ValidationError</Code>"},
		{"a bad health status", v("Action", "SetInstanceHealth", "InstanceId", "i-0aaa", "HealthStatus", "Sick"), "autoscaling", 400, "<Code>ValidationError</Code>"},
		{"signed for another service", v("Action", "SetInstanceHealth", "InstanceId", "i-0aaa", "HealthStatus", "Unhealthy"), "ec2", 403, "<Code>SignatureDoesNotMatch</Code>"},
		{"another version", url.Values{"Action": {"DescribeAutoScalingInstances"}, "Version": {"2016-11-15"}}, "autoscaling", 400, "Unsupported Version"},
		{"set health", v("Action", "SetInstanceHealth", "InstanceId", "i-0aaa", "HealthStatus", "Unhealthy"), "autoscaling", 200, "<SetInstanceHealthResponse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := call(c.form, c.service)
			if status != c.status || !strings.Contains(body, c.want) {
				t.Errorf("HTTP %d %s\nwant %d %q", status, body, c.status, c.want)
			}
		})
	}
	in, _ := s.AutoScalingInstance("us-west-2", "i-0aaa")
	if len(in.HealthCalls) != 1 || !in.HealthCalls[0].RespectGracePeriod || in.LifecycleState != "Terminating" || in.HealthStatus != "UNHEALTHY" {
		t.Errorf("after SetInstanceHealth without ShouldRespectGracePeriod: %+v", in)
	}
}

func TestDecodeAWSChunked(t *testing.T) {
	for _, c := range []struct {
		in, body, trailer, err string
	}{
		{"3;chunk-signature=ab\r\nabc\r\n0;chunk-signature=cd\r\n\r\n", "abc", "", ""},
		{"2\r\nab\r\n1\r\nc\r\n0\r\nx-amz-checksum-sha256:xyz\r\n\r\n", "abc", "xyz", ""},
		{"5\r\nab\r\n", "", "", "ends early"},
		{"zz\r\nab\r\n", "", "", "chunk size"},
		{"2\r\nabX\r\n0\r\n\r\n", "", "", "not followed by CRLF"},
	} {
		body, tr, err := decodeAWSChunked([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(body) != c.body || tr.Get("X-Amz-Checksum-Sha256") != c.trailer {
			t.Errorf("%q: %q %v %v", c.in, body, tr, err)
		}
	}
}

func FuzzDecodeAWSChunked(f *testing.F) {
	f.Add([]byte("3\r\nabc\r\n0\r\n\r\n"))
	f.Add([]byte("2\r\nab\r\n0\r\nx-amz-checksum-crc32:DGFXEA==\r\n\r\n"))
	f.Add([]byte("ffffffff\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		body, _, err := decodeAWSChunked(in)
		if err == nil && len(body) > len(in) {
			t.Errorf("decoded %d bytes from %d", len(body), len(in))
		}
		if err == nil && !bytes.Contains(in, []byte("\r\n")) && len(body) > 0 {
			t.Errorf("a body without any chunk line: %q", in)
		}
	})
}
