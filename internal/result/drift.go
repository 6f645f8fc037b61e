package result

import "fmt"

// Drift is one difference the kernel guard found between the baseline and a later snapshot
// (its Kind is one of package guard's Drift* kinds): a record of the reports, kept here so that
// the reports need not import the guard.
type Drift struct {
	Kind    string `json:"kind"`
	Package string `json:"package"`
	Before  string `json:"before"`
	After   string `json:"after"`
}

// String reads "linux-image-7.0.0-1014-aws: held → not held".
func (d Drift) String() string {
	return fmt.Sprintf("%s: %s → %s", d.Package, d.Before, d.After)
}
