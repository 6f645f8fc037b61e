package awsfake

import (
	"net"
	"net/netip"
	"time"
)

// First and last loopback addresses handed to instances: 127.0.0.1 is the
// host's own, and the simulated hosts' sshd each bind one of these.
var (
	firstInstanceAddr = netip.MustParseAddr("127.0.0.2")
	lastInstanceAddr  = netip.MustParseAddr("127.0.255.254")
)

// allocAddress returns the lowest free loopback address. It runs under s.mu.
func (s *Server) allocAddress(instanceID string) (string, bool) {
	for a := firstInstanceAddr; a.Compare(lastInstanceAddr) <= 0; a = a.Next() {
		b := a.As4()
		if b[3] == 0 || b[3] == 255 {
			continue
		}
		if _, used := s.addresses[a.String()]; used {
			continue
		}
		// With simulated hosts, an address where something already answers
		// on port 22 (another fake's host, a test's sshd) is not free.
		if s.machines != nil && s.addrBusy(a.String()) {
			continue
		}
		s.addresses[a.String()] = instanceID
		return a.String(), true
	}
	return "", false
}

func (s *Server) releaseAddress(addr string) {
	if addr != "" {
		delete(s.addresses, addr)
	}
}

// sshListening reports whether something accepts TCP on addr:22.
func sshListening(addr string) bool { return listening(addr, "22") }

func listening(addr, port string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
