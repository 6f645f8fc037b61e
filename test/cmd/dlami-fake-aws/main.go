// Command dlami-fake-aws serves a local fake of the AWS APIs the dlami data
// source and the amazon-ebs builder use (SSM, a stateful EC2, STS) on a
// loopback port, seeded with DLAMI-like images, for demos and end-to-end
// tests. Its first line on stdout is "endpoint=http://127.0.0.1:PORT".
//
//	dlami-fake-aws [--listen 127.0.0.1:0] [--simhost [--simhost-dir DIR] [--state-root DIR]]
//	               [--regions us-east-1,eu-west-1] [--seed seed.json] [--transition-polls N]
//	               [--fault 'DescribeImages@us-west-2=throttle:2,latency:50ms']... [--url-file path] [--quiet]
//	               [--new-instance-type p7-future.48xlarge=p6-b200.48xlarge]...
//	dlami-fake-aws --print-seed [--regions ...] > seed.json   # edit, then --seed seed.json
//
// With --simhost (as root) every EC2 instance is a simulated DLAMI host on
// its own loopback address (127.0.0.2, 127.0.0.3, ...) with sshd on port 22.
// SIGTERM (or SIGINT) terminates every instance, unmounts everything and
// exits 0. Point clients at it with AWS_ENDPOINT_URL (every service) or the
// per-service endpoints and any static credentials; the region comes from
// each request's signature. test/e2e/README.md ("The fake AWS endpoint")
// documents the EC2 surface and the control API under /_fake/.
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

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// faultFlags collects a repeatable flag (--fault, --new-instance-type).
type faultFlags []string

func (f *faultFlags) String() string     { return strings.Join(*f, " ") }
func (f *faultFlags) Set(v string) error { *f = append(*f, v); return nil }

// listenFlag backs both --listen and its old alias -addr.
type listenFlag struct{ addr string }

func (l *listenFlag) String() string     { return l.addr }
func (l *listenFlag) Set(v string) error { l.addr = v; return nil }

// deps are what run needs from the outside world; tests replace them.
type deps struct {
	newMachines func(machineOptions) (awsfake.Machines, error)
	geteuid     func() int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, deps{newMachines: newMachines, geteuid: os.Geteuid}); err != nil {
		fmt.Fprintln(os.Stderr, "dlami-fake-aws:", err)
		os.Exit(1)
	}
}

// closeTimeout bounds the teardown after SIGTERM: every host is stopped and
// unmounted within it or the command exits non-zero saying what is left.
const closeTimeout = 2 * time.Minute

// run serves until ctx is done, then closes the machines.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) error {
	fs := flag.NewFlagSet("dlami-fake-aws", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := &listenFlag{addr: "127.0.0.1:0"}
	fs.Var(listen, "listen", "listen address (port 0 picks a free port)")
	fs.Var(listen, "addr", "alias of --listen")
	simhost := fs.Bool("simhost", false, "back every EC2 instance with a simulated DLAMI host (needs root)")
	simhostDir := fs.String("simhost-dir", "", "test/simhost of the checkout (default: found from the working directory)")
	stateRoot := fs.String("state-root", "", "directory for the hosts' disks and captured layers (default: a new temporary directory, removed at exit)")
	transitionPolls := fs.Int("transition-polls", awsfake.DefaultTransitionPolls, "Describe answers that show pending/stopping/shutting-down after the work is done")
	regions := fs.String("regions", "", "comma-separated regions for the built-in seed (default: 16 regions)")
	seed := fs.String("seed", "", "JSON seed file replacing the built-in seed ({\"regions\":{\"us-east-1\":{\"images\":[...],\"parameters\":[...]}}})")
	urlFile := fs.String("url-file", "", "also write the URL (without endpoint=) to this file once listening")
	quiet := fs.Bool("quiet", false, "do not log each request")
	printSeed := fs.Bool("print-seed", false, "print the built-in seed (for --regions) as JSON, a starting point for --seed files, and exit")
	var newTypes faultFlags
	fs.Var(&newTypes, "new-instance-type", "NAME=LIKE (repeatable): also describe and launch NAME, a type the fact sheet does not have, with LIKE's figures (a GPU type newer than the plugin's profiles)")
	var faults faultFlags
	fs.Var(&faults, "fault", "fault spec OP[@REGION]=KIND[:ARG],... (repeatable); OP: an action the fake serves or *; KIND: throttle:N, 500:N, lose-answer:N, hang:N, latency:D, denied, malformed, capacity:N and stuck-pending:N (RunInstances)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !*simhost && (*simhostDir != "" || *stateRoot != "") {
		return errors.New("--simhost-dir and --state-root only make sense with --simhost")
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
	srv.SetTransitionPolls(*transitionPolls)
	srv.SetLog(stderr)
	if *seed != "" {
		f, err := os.Open(*seed)
		if err != nil {
			return err
		}
		sd, err := awsfake.DecodeSeed(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *seed, err)
		}
		srv.Load(sd)
	} else {
		var rs []string
		if *regions != "" {
			rs = strings.Split(*regions, ",")
		}
		srv.Load(awsfake.DefaultSeed(rs...))
	}
	for _, spec := range newTypes {
		name, like, ok := strings.Cut(spec, "=")
		if !ok {
			return fmt.Errorf("--new-instance-type %q: want NAME=LIKE, e.g. p7-future.48xlarge=p6-b200.48xlarge", spec)
		}
		if err := srv.AddInstanceType(name, like); err != nil {
			return fmt.Errorf("--new-instance-type: %w", err)
		}
	}
	for _, spec := range faults {
		op, region, f, err := awsfake.ParseFault(spec)
		if err != nil {
			return err
		}
		srv.SetFault(op, region, f)
	}

	logger := log.New(stderr, "dlami-fake-aws: ", log.LstdFlags)
	closedCleanly := false
	closeAfter := func(err error) error {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		cerr := srv.Close(ctx)
		closedCleanly = cerr == nil
		return errors.Join(err, cerr)
	}
	if *simhost {
		if d.geteuid() != 0 {
			return errors.New("--simhost needs root: the simulated hosts mount overlay filesystems and bind sshd to loopback addresses (run it with sudo)")
		}
		m, tmpRoot, err := openMachines(*simhostDir, *stateRoot, stderr, d.newMachines)
		if err != nil {
			return err
		}
		srv.SetMachines(m)
		if tmpRoot != "" {
			logger.Printf("simulated hosts' disks under %s (removed at exit)", tmpRoot)
			// Removed only after a clean Close: a directory that may still
			// hold mounts is never deleted.
			defer func() {
				if closedCleanly {
					if err := os.RemoveAll(tmpRoot); err != nil {
						logger.Printf("removing %s: %v", tmpRoot, err)
					}
				} else {
					logger.Printf("left %s in place: the hosts did not shut down cleanly", tmpRoot)
				}
			}()
		}
	}

	ln, err := net.Listen("tcp", listen.addr)
	if err != nil {
		return closeAfter(fmt.Errorf("--listen %s: %w", listen.addr, err))
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintln(stdout, "endpoint="+url)
	if *urlFile != "" {
		// Write then rename so a poller never reads a half-written URL.
		tmp := *urlFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(url+"\n"), 0o644); err != nil {
			ln.Close()
			return closeAfter(err)
		}
		if err := os.Rename(tmp, *urlFile); err != nil {
			ln.Close()
			return closeAfter(err)
		}
	}
	logger.Printf("serving regions %s at %s (simulated hosts: %t)", strings.Join(srv.Regions(), ","), url, *simhost)
	if !*quiet {
		srv.Observe(func(c awsfake.Call) { logger.Printf("%s %s -> %d", c.Region, c.Op, c.Status) })
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var serveErr error
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	case <-ctx.Done():
		logger.Printf("shutting down: terminating every instance")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		serveErr = hs.Shutdown(sctx)
		cancel()
	}
	if err := closeAfter(serveErr); err != nil {
		return err
	}
	logger.Printf("stopped: every instance terminated")
	return nil
}
