// Command dlami-fake-aws serves a local fake of the AWS APIs the dlami data
// source uses (SSM GetParameter/GetParametersByPath, EC2 DescribeImages, STS
// AssumeRole) on a loopback port, seeded with DLAMI-like images, for demos
// and end-to-end tests. It prints its URL as the first line on stdout.
//
//	dlami-fake-aws [-addr 127.0.0.1:0] [-regions us-east-1,eu-west-1] [-seed seed.json]
//	               [-fault 'DescribeImages@us-west-2=throttle:2,latency:50ms']... [-url-file path] [-quiet]
//	dlami-fake-aws -print-seed [-regions ...] > seed.json   # edit, then -seed seed.json
//
// Point the data source at it with ssm_endpoint/ec2_endpoint (or
// AWS_ENDPOINT_URL_SSM/_EC2) and any static credentials; the region comes
// from each request's signature.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsfake"
)

type faultFlags []string

func (f *faultFlags) String() string     { return strings.Join(*f, " ") }
func (f *faultFlags) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dlami-fake-aws:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dlami-fake-aws", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	regions := fs.String("regions", "", "comma-separated regions for the built-in seed (default: 16 regions)")
	seed := fs.String("seed", "", "JSON seed file replacing the built-in seed ({\"regions\":{\"us-east-1\":{\"images\":[...],\"parameters\":[...]}}})")
	urlFile := fs.String("url-file", "", "also write the URL to this file once listening")
	quiet := fs.Bool("quiet", false, "do not log each request")
	printSeed := fs.Bool("print-seed", false, "print the built-in seed (for -regions) as JSON, a starting point for -seed files, and exit")
	var faults faultFlags
	fs.Var(&faults, "fault", "fault spec OP[@REGION]=KIND[:ARG],... (repeatable); OP: GetParameter, GetParametersByPath, DescribeImages, AssumeRole, *; KIND: throttle:N, 500:N, latency:D, denied, malformed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	if *printSeed {
		var rs []string
		if *regions != "" {
			rs = strings.Split(*regions, ",")
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(awsfake.DefaultSeed(rs...))
	}

	srv := awsfake.New()
	if *seed != "" {
		f, err := os.Open(*seed)
		if err != nil {
			return err
		}
		d, err := awsfake.DecodeSeed(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *seed, err)
		}
		srv.Load(d)
	} else {
		var rs []string
		if *regions != "" {
			rs = strings.Split(*regions, ",")
		}
		srv.Load(awsfake.DefaultSeed(rs...))
	}
	for _, spec := range faults {
		op, region, f, err := awsfake.ParseFault(spec)
		if err != nil {
			return err
		}
		srv.SetFault(op, region, f)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintln(stdout, url)
	if *urlFile != "" {
		// Write then rename so a poller never reads a half-written URL.
		tmp := *urlFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(url+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *urlFile); err != nil {
			return err
		}
	}
	logger := log.New(stderr, "dlami-fake-aws: ", log.LstdFlags)
	logger.Printf("serving regions %s at %s", strings.Join(srv.Regions(), ","), url)
	if !*quiet {
		srv.Observe(func(c awsfake.Call) { logger.Printf("%s %s -> %d", c.Region, c.Op, c.Status) })
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	}
}
