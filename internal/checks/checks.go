// Package checks judges the output of the host validation commands and of the 1-node NCCL test
// into typed results. It runs nothing: the provisioner sends the commands this package lists and
// hands their output back.
//
// Every check compares the host with an expectation whose basis it records: an explicit
// setting first, then the instance type's built-in profile, then the host's own PCI
// inventory. A check with nothing to compare against warns and names the setting that would
// make it judge; it never passes.
package checks
