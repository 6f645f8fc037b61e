package facts

// MultiNodeRun is the NCCL test across the nodes of a verification: who took part, what the
// run on the first node printed, and what each node showed around it.
type MultiNodeRun struct {
	// NotRun says why the engine did not run it ("" when it ran or tried to); Problem why it
	// could not run (the nodes' key could not be installed, a node did not answer).
	NotRun  string
	Problem string
	// Setting names the setting that asked for it ("nodes = 2").
	Setting string
	// Nodes are the nodes in the order of the host file: the first ran mpirun.
	Nodes []MultiNodeNode
	// NCCL is the run on the first node.
	NCCL NCCLRun
	// MNNVL is the second run on a multi-node NVLink type, with NCCL_MNNVL_ENABLE=1 (check
	// nccl-mnnvl); its NotRun says why it did not run (another type, the first run failed).
	MNNVL NCCLRun
	// IMEXDomain is the IMEX domain brought up across the nodes before the second run (check
	// imex-domain); its NotRun says why it was not.
	IMEXDomain IMEXDomainRun
}

// MultiNodeNode is one node of a test across nodes.
type MultiNodeNode struct {
	// InstanceID, Address (the private address the nodes reach each other at), InstanceType,
	// SubnetID and PlacementGroup say which instance it is.
	InstanceID, Address, InstanceType, SubnetID, PlacementGroup string
	// HostName is what the node calls itself (hostname), the name NCCL prints in its lines;
	// "" when it could not be read.
	HostName string
	// EFA is the number of EFA interfaces its launch attached, as EC2 describes the instance.
	EFA int
	// Mark is where its kernel log ended before the test; KernelLog and KernelJournal are
	// read after it.
	Mark          *Mark
	KernelLog     Fact[KernelLog]
	KernelJournal Fact[KernelJournal]
	// Left is how many of the test's processes were still found on the node after they were
	// stopped (-1 when not looked at); StopProblem why stopping them failed.
	Left        int
	StopProblem string
}
