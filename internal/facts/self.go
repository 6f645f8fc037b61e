package facts

import "time"

// Self is what a host says about itself as an EC2 instance, for the record of the instance a
// bake ran on: its type, its id, and how long it had been up (since its kernel booted) when it
// was read.
type Self struct {
	Instance Instance
	ID       Fact[string]
	Uptime   Fact[time.Duration]
}
