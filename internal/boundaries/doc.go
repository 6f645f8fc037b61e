// Package boundaries holds no code: its test asserts the import rules between the plugin's
// packages (records and transports import no judges or domain packages), so a forbidden edge
// fails `go test` the day it comes back.
package boundaries
