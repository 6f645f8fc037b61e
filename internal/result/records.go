// The records of a run that the reports and the bill of materials share: the NCCL test's
// figures and what changed since a previous bill of materials.

package result

// Changes is what changed between a previous bake's bill of materials and this one's.
type Changes struct {
	// Previous names the bill of materials compared against (its build and when it was made,
	// and the file).
	Previous string `json:"previous"`
	// Items are the components and packages whose version differs, in a fixed order: kernel,
	// driver, CUDA, NCCL, EFA, toolkit, then packages by name. Empty when nothing changed.
	Items []Change `json:"items"`
	// Compared is how many components and packages were compared.
	Compared int `json:"compared"`
}

// Change is one component whose version differs ("(absent)" where one side lacks it).
type Change struct {
	Component string `json:"component"`
	Before    string `json:"before"`
	After     string `json:"after"`
}

// NCCLFigures are the measured values of one NCCL test, for the report.
type NCCLFigures struct {
	Binary           string `json:"binary"`
	NCCLVersion      string `json:"nccl_version"`
	LargestSizeBytes int64  `json:"largest_size_bytes"`
	// BusBWGBps is the busbw of the largest message size, out-of-place (BusBWPlacement).
	BusBWGBps      *float64 `json:"busbw_gbps"`
	BusBWPlacement string   `json:"busbw_placement"`
	AvgBusBWGBps   *float64 `json:"avg_busbw_gbps"`
	OutOfBounds    *int64   `json:"out_of_bounds"`
	Network        string   `json:"network"`
	Provider       string   `json:"provider"`
	// DataTransport says what moved the data on this node ("NVLS + P2P/CUMEM (NVLink or
	// PCIe peer-to-peer)", "SHM", "NET/Socket"); "" when the log does not say.
	DataTransport string `json:"data_transport"`
	NICs          *int   `json:"nics"`
	ExitCode      int    `json:"exit_code"`
	TimedOut      bool   `json:"timed_out"`
	// Seconds is how long the test ran (0 when unknown).
	Seconds float64 `json:"seconds,omitempty"`
	// BusBWFloorGBps is the busbw floor the nccl-busbw check judged the largest size against
	// (nccl.min_busbw_gbps or the instance type's profile); nil when there was none.
	BusBWFloorGBps *float64 `json:"busbw_floor_gbps,omitempty"`
	// Points are the result table's rows: one per message size of the run, in order.
	Points []NCCLPoint `json:"points,omitempty"`
}

// NCCLPoint is one message size of an NCCL test's result table. A nil bandwidth is a cell
// that was not a number.
type NCCLPoint struct {
	SizeBytes int64 `json:"size_bytes"`
	// BusBWGBps is the out-of-place busbw; InPlaceBusBWGBps the in-place one.
	BusBWGBps        *float64 `json:"busbw_gbps"`
	InPlaceBusBWGBps *float64 `json:"in_place_busbw_gbps"`
}
