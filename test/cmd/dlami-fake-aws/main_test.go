package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesAndStops(t *testing.T) {
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "url")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-regions", "us-east-1", "-url-file", urlFile, "-fault", "GetParameter=throttle:1"}, &stdout, &stderr, testDeps(nil))
	}()
	var url string
	for i := 0; i < 200 && url == ""; i++ {
		if b, err := os.ReadFile(urlFile); err == nil {
			url = strings.TrimSpace(string(b))
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasPrefix(stdout.String(), "endpoint="+url+"\n") {
		t.Fatalf("url file %q, stdout %q", url, stdout.String())
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"Name":"/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"}`))
	req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIA/20261130/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=0")
	for _, want := range []int{400, 200} { // the injected throttle, then the answer
		resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("status %d, want %d", resp.StatusCode, want)
		}
		req.Body, _ = req.GetBody()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(stderr.String(), "us-east-1 GetParameter -> 400") {
		t.Errorf("request log missing: %s", stderr.String())
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "seed.json")
	if err := os.WriteFile(bad, []byte(`{"regions":{"r":{"images":[{"id":"x"}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-fault", "Nope=throttle"}, "unknown operation"},
		{[]string{"-seed", bad}, "must start with ami-"},
		{[]string{"-seed", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out, errOut syncBuffer
		err := run(context.Background(), tc.args, &out, &errOut, testDeps(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestPrintSeedRoundTrips(t *testing.T) {
	var out, errOut syncBuffer
	if err := run(context.Background(), []string{"-print-seed", "-regions", "ap-south-1"}, &out, &errOut, testDeps(nil)); err != nil {
		t.Fatal(err)
	}
	seed := filepath.Join(t.TempDir(), "seed.json")
	if err := os.WriteFile(seed, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"ap-south-1"`) || !strings.Contains(out.String(), "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002") {
		t.Fatalf("seed output: %.300s", out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// run loads the seed, listens and logs before it looks at ctx, so
	// cancelling at once still exercises the whole start-up.
	cancel()
	go func() { done <- run(ctx, []string{"-seed", seed, "-quiet"}, &out, &errOut, testDeps(nil)) }()
	if err := <-done; err != nil {
		t.Fatalf("serving the printed seed: %v", err)
	}
	if !strings.Contains(errOut.String(), "serving regions ap-south-1") {
		t.Errorf("log: %s", errOut.String())
	}
}
