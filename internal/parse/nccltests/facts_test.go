package nccltests

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

// facts is the part of a Result the rule table decides, in a comparable form.
type facts struct {
	NCCLVersion                    string
	OFIPlugin                      bool
	OFIVersion                     string
	NetPlugin, NetPluginEnv        string
	PluginMissing                  bool
	Networks                       []string
	Providers                      string
	Socket, NCCLNetIB              bool
	ForwardCompat                  bool
	DataPaths, DataTransports      []string
	NVLSAvailable, NVLS            bool
	RingsConnected, TreesConnected bool
	NRanks                         int
	Failure                        bool
}

func factsOf(r Result) facts {
	tr := r.Transport
	return facts{
		NCCLVersion: r.NCCLVersion, OFIPlugin: tr.OFIPlugin, OFIVersion: tr.OFIVersion,
		NetPlugin: tr.NetPlugin, NetPluginEnv: tr.NetPluginEnv, PluginMissing: tr.PluginMissing,
		Networks: tr.Networks, Providers: providerString(tr.Providers), Socket: tr.Socket,
		NCCLNetIB: tr.NCCLNetIB, ForwardCompat: tr.ForwardCompat, DataPaths: tr.DataPaths,
		DataTransports: tr.DataTransports, NVLSAvailable: tr.NVLSAvailable, NVLS: tr.NVLS,
		RingsConnected: tr.RingsConnected, TreesConnected: tr.TreesConnected, NRanks: r.NRanks, Failure: len(r.Errors) > 0,
	}
}

// lineShapes are the ways one NCCL message reaches the parser.
var lineShapes = []struct {
	name string
	warn bool
	wrap func(msg string) string
}{
	{"NCCL INFO", false, func(m string) string { return "ip-10-0-1-23:4100:4160 [0] NCCL INFO " + m }},
	{"NCCL WARN", true, func(m string) string { return "ip-10-0-1-23:4100:4160 [0] NCCL WARN " + m }},
	{"Open MPI --tag-output", false, func(m string) string { return "[1,0]<stdout>:ip-10-0-1-23:4100:4160 [0] NCCL INFO " + m }},
	{"srun --label", false, func(m string) string { return " 0: ip-10-0-1-23:4100:4160 [0] NCCL INFO " + m }},
	{"plain message", false, func(m string) string { return m }},
}

// factCases are NCCL messages and the facts each one alone sets. Every rule of factRules is
// matched by at least one of them (TestFactRulesAllExercised).
var factCases = []struct {
	msg  string
	want facts
}{
	{"NCCL version 2.27.7+cuda13.0", facts{NCCLVersion: "2.27.7+cuda13.0"}},
	{"Using network Socket", facts{Networks: []string{"Socket"}, Socket: true}},
	{"Using network AWS Libfabric", facts{Networks: []string{"AWS Libfabric"}}},
	{"NET/OFI Selected provider is efa, fabric is efa-direct (found 8 nics)", facts{OFIPlugin: true, Providers: "efa/8"}},
	{"NET/OFI Selected Provider is efa", facts{OFIPlugin: true, Providers: "efa/-"}},
	{"NET/OFI Initializing aws-ofi-nccl 1.9.1-aws", facts{OFIPlugin: true, OFIVersion: "1.9.1-aws"}},
	{"Initializing aws-ofi-nccl 1.9.1", facts{OFIPlugin: true, OFIVersion: "1.9.1"}},
	{"NET/OFI Setting NCCL_NVLS_CHUNKSIZE to 512KiB", facts{OFIPlugin: true}},
	{"NET/Plugin: Loaded net plugin Libfabric (v10)", facts{NetPlugin: "Libfabric", OFIPlugin: true}},
	{"NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)", facts{NetPlugin: "NCCL RDMA Plugin v8"}},
	{"NET/Plugin: Plugin name set by env to libnccl-net.so", facts{NetPluginEnv: "libnccl-net.so"}},
	{"NCCL_NET_PLUGIN set by environment to /opt/amazon/ofi-nccl/lib/libnccl-net.so",
		facts{NetPluginEnv: "/opt/amazon/ofi-nccl/lib/libnccl-net.so"}},
	{"NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.", facts{PluginMissing: true}},
	{"NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", facts{PluginMissing: true}},
	{"NET/Plugin : Using internal network plugin.", facts{PluginMissing: true}},
	{"NET/Socket : Using [0]eth0:10.0.0.1<0>", facts{Socket: true}},
	{"Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0",
		facts{Socket: true, DataPaths: []string{"NET/Socket/0"}, DataTransports: []string{"NET/Socket"}}},
	{"Ring 00 : 7 -> 8 [send] via NET/Socket/0",
		facts{Socket: true, DataPaths: []string{"NET/Socket/0"}, DataTransports: []string{"NET/Socket"}}},
	{"NCCL_NET set by environment to IB", facts{NCCLNetIB: true}},
	{`mpirun -x NCCL_NET="ib" -x NCCL_DEBUG=INFO`, facts{NCCLNetIB: true}},
	{"CUDA Forward Compatibility mode ENABLED.", facts{ForwardCompat: true}},
	{"Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
		facts{DataPaths: []string{"P2P/CUMEM/read"}, DataTransports: []string{"P2P/CUMEM"}}},
	{"Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer",
		facts{DataPaths: []string{"P2P/direct pointer"}, DataTransports: []string{"P2P/direct pointer"}}},
	{"Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
		facts{DataPaths: []string{"SHM/direct/direct"}, DataTransports: []string{"SHM"}}},
	{"Channel 00 : 4[84000] -> 3[9000] via direct shared memory",
		facts{DataPaths: []string{"direct shared memory"}, DataTransports: []string{"SHM"}}},
	{"Channel 01/0 : 3[1] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA/Shared",
		facts{DataPaths: []string{"NET/Libfabric/0/GDRDMA/Shared"}, DataTransports: []string{"NET/Libfabric"}}},
	{"CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA",
		facts{DataPaths: []string{"COLLNET/SHARP/0/GDRDMA"}, DataTransports: []string{"COLLNET/SHARP"}}},
	{"Coll 00 : 0 [send] via COLLNET/SHARP/0",
		facts{DataPaths: []string{"COLLNET/SHARP/0"}, DataTransports: []string{"COLLNET/SHARP"}}},
	{"NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 24)", facts{NVLSAvailable: true}},
	{"NVLS comm 0x55d0c0a00000 headRank 0 nHeads 8 nvlsRanks 8 buffSize 1048576 nvlsPerRankSize 50331648 nvlsTotalSize 402653184",
		facts{NVLS: true}},
	{"Connected NVLS tree", facts{NVLS: true}},
	{"Connected all rings, use ring PXN 0 GDR 1", facts{RingsConnected: true}},
	{"Connected all trees", facts{TreesConnected: true}},
	{"ncclCommInitRankConfig comm 0x55d0c0a1b2c0 rank 9 nranks 16 cudaDev 1 nvmlDev 1 busId 53000 commId 0x9f1c - Init COMPLETE",
		facts{NRanks: 16}},
	{"comm 0x7f2a7c000f60 rank 0 nranks 16 cudaDev 0 busId 101c0 - Init COMPLETE", facts{NRanks: 16}},
	{"ip-10-0-1-23: Test NCCL failure common.cu:1279 'unhandled cuda error'", facts{Failure: true}},
	{"ip-10-0-1-23: Test CUDA failure common.cu:905 'out of memory'", facts{Failure: true}},
	{"all_reduce_perf: Test timeout (60s) common.cu:412", facts{Failure: true}},
	{".. ip-10-0-1-23 pid 4100: Test failure common.cu:1139", facts{Failure: true}},
	{"MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD", facts{Failure: true}},
	{"mpirun noticed that process rank 3 with PID 0 on node ip-10-0-1-23 exited on signal 11 (Segmentation fault).", facts{Failure: true}},
	{"mpirun detected that one or more processes exited with non-zero status, thus causing", facts{Failure: true}},
	{"Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)", facts{Failure: true}},
	{"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", facts{Failure: true}},
	{"init.cc:1045 NCCL WARN call to bootstrap failed: unhandled system error", facts{Failure: true}},

	// Lines that look close to a fact but are not one.
	{"NVLS multicast support is not available on dev 0", facts{}},
	{"NVLS Head  0:  0  8", facts{}},
	{"Ring 00 : 0 -> 7 -> 6", facts{}},
	{"Channel 00/24 :    0   1   2   3   4   5   6   7", facts{}},
	{"TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.", facts{}},
	{"NCCL_NET_GDR_LEVEL set by environment to SYS", facts{}},
	{"NCCL_NET set by environment to IBext_v8", facts{}},
	{"This application was compiled with NCCL version 2.29.2, but is running with NCCL 2.27.7", facts{}},
	{"+ echo NET/OFI Initializing", facts{}},
}

// TestFactsSameInEveryShape checks each fact and that it does not depend on the shape of the
// line that carries it: INFO, WARN, launcher-prefixed or plain. A WARN line is a failure too.
func TestFactsSameInEveryShape(t *testing.T) {
	for _, tc := range factCases {
		for _, shape := range lineShapes {
			t.Run(shape.name+"/"+tc.msg, func(t *testing.T) {
				r, err := ParseString(shape.wrap(tc.msg) + "\n")
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want
				want.Failure = want.Failure || shape.warn
				if got := factsOf(r); !reflect.DeepEqual(got, want) {
					t.Errorf("line %q\n got %+v\nwant %+v", shape.wrap(tc.msg), got, want)
				}
			})
		}
	}
}

// TestOldExtractorDisagreements pins the two cases where the former INFO-only and non-INFO
// extractors gave different answers for the same text; testdata has a log for each
// (derived-ring-via-socket-nccl2.4.txt, derived-ofi-banner-message-only.txt).
func TestOldExtractorDisagreements(t *testing.T) {
	tests := []struct {
		name string
		line string
		chk  func(tr Transport) bool
	}{
		{"Ring via NET/Socket in an INFO line", "h:1:2 [0] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/Socket/0",
			func(tr Transport) bool { return tr.Socket }},
		{"Ring via NET/Socket in a WARN line", "h:1:2 [0] NCCL WARN Ring 00 : 7 -> 8 [send] via NET/Socket/0",
			func(tr Transport) bool { return tr.Socket }},
		{"bare aws-ofi-nccl banner in an INFO line", "h:1:2 [0] NCCL INFO Initializing aws-ofi-nccl 1.9.1",
			func(tr Transport) bool { return tr.OFIPlugin && tr.OFIVersion == "1.9.1" }},
		{"bare aws-ofi-nccl banner on its own", "Initializing aws-ofi-nccl 1.9.1",
			func(tr Transport) bool { return tr.OFIPlugin && tr.OFIVersion == "1.9.1" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseString(tc.line + "\n")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.chk(r.Transport) {
				t.Errorf("%q gave %+v", tc.line, r.Transport)
			}
		})
	}
}

// TestFactRulesAllExercised makes sure no rule of the table is left without a case above.
func TestFactRulesAllExercised(t *testing.T) {
	for i := range factRules {
		r := &factRules[i]
		used := r.warnOnly // a WARN-only rule is exercised by every case in the WARN shape
		for _, tc := range factCases {
			if _, ok := r.match([]byte(tc.msg)); ok {
				used = true
				break
			}
		}
		if !used {
			t.Errorf("rule %d (%s, %q) matches no case of factCases", i, r.fact, r.lit)
		}
	}
}

// TestFactRulesWellFormed checks the table itself: every rule names its fact and can set it,
// and only the WARN rule matches every message.
func TestFactRulesWellFormed(t *testing.T) {
	if len(factRules) > maxRules {
		t.Fatalf("%d rules, the per-line match array holds %d: raise maxRules", len(factRules), maxRules)
	}
	for i, r := range factRules {
		switch {
		case r.fact == "" || r.set == nil:
			t.Errorf("rule %d: fact %q, set %v: a rule must name its fact and set it", i, r.fact, r.set != nil)
		case len(r.lit) == 0 && !r.warnOnly:
			t.Errorf("rule %d (%s): an empty literal would match every line", i, r.fact)
		case r.how != matchPrefix && len(r.lit) < minIndexedLiteral:
			t.Errorf("rule %d (%s): literal %q is shorter than %d bytes, the rule index would never find it", i, r.fact, r.lit, minIndexedLiteral)
		case r.how == matchRegexp && r.re == nil:
			t.Errorf("rule %d (%s): a regexp rule without a regexp", i, r.fact)
		case r.how != matchRegexp && r.re != nil:
			t.Errorf("rule %d (%s): a regexp on a literal rule is never used", i, r.fact)
		}
	}
}

// ruleIndexAgrees checks that the rule index proposes every rule that matches msg, and for the
// contains rules exactly those, at the first occurrence bytes.Index finds.
func ruleIndexAgrees(t *testing.T, msg []byte) {
	t.Helper()
	for _, tag := range []lineTag{tagNone, tagInfo, tagWarn} {
		var after [maxRules]int32
		set := factIndex.candidates(msg, tag, factRules, &after)
		for i, r := range factRules {
			proposed := set&(1<<i) != 0
			_, matches := r.match(msg)
			matches = matches && (!r.warnOnly || tag == tagWarn)
			if matches && !proposed {
				t.Fatalf("rule %d (%s, %q) matches %q (tag %d) but the index did not propose it", i, r.fact, r.lit, msg, tag)
			}
			if r.how != matchContains {
				continue
			}
			want := int32(0)
			if k := bytes.Index(msg, r.lit); k >= 0 {
				want = int32(k+len(r.lit)) + 1
			}
			if after[i] != want || proposed != matches {
				t.Fatalf("rule %d (%q) in %q: index says %d (proposed %v), bytes.Index says %d", i, r.lit, msg, after[i], proposed, want)
			}
		}
	}
}

func TestRuleIndexAgreesWithMatch(t *testing.T) {
	msgs := [][]byte{nil, []byte("NCCL_NE"), []byte("NCCL_NET"), []byte("xNCCL_NETx NCCL_NET=IB"),
		[]byte("Test Test NCCL failure Test timeout"), []byte("MPI_ABORTMPI_ABORT"),
		[]byte("Ring 00 : 7 -> 8 [send] via NET/Socket/0 NET/Socket")}
	for _, tc := range factCases {
		msgs = append(msgs, []byte(tc.msg))
	}
	for _, name := range fixture.Names(t, ".txt") {
		for _, line := range strings.Split(fixture.Read(t, name), "\n") {
			_, msg := splitTag([]byte(line))
			msgs = append(msgs, msg)
		}
	}
	for _, m := range msgs {
		ruleIndexAgrees(t, m)
	}
}

// FuzzRuleIndex checks the rule index against rule.match on any message.
func FuzzRuleIndex(f *testing.F) {
	for _, tc := range factCases {
		f.Add(tc.msg)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		ruleIndexAgrees(t, []byte(msg))
	})
}

func TestSplitTag(t *testing.T) {
	tests := []struct {
		line string
		tag  lineTag
		msg  string
	}{
		{"h:1:2 [0] NCCL INFO Using network Libfabric", tagInfo, "Using network Libfabric"},
		{"h:1:2 [0] NCCL WARN   Error: network IB not found.", tagWarn, "Error: network IB not found."},
		{"h: Test NCCL failure common.cu:1279 'x (run with NCCL_DEBUG=WARN)'", tagNone, "h: Test NCCL failure common.cu:1279 'x (run with NCCL_DEBUG=WARN)'"},
		{"NCCL version 2.4.8+cuda10.0", tagNone, "NCCL version 2.4.8+cuda10.0"},
		{"h:1:2 [0] NCCL INFO", tagInfo, ""},
		{"", tagNone, ""},
	}
	for _, tc := range tests {
		tag, msg := splitTag([]byte(tc.line))
		if tag != tc.tag || string(msg) != tc.msg {
			t.Errorf("splitTag(%q) = %d, %q, want %d, %q", tc.line, tag, msg, tc.tag, tc.msg)
		}
	}
}

// TestEvidenceOneKindPerLine checks that the first rule to offer a line decides its kind: a 4th
// provider line is not kept (providers keep 3) although it is a NET/OFI line too, while a plain
// NET/OFI line still is; each message is kept once whatever rank printed it.
func TestEvidenceOneKindPerLine(t *testing.T) {
	in := "h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)\n" +
		"h:1:2 [1] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)\n" +
		"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 2 nics)\n" +
		"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 3 nics)\n" +
		"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)\n" +
		"h:1:1 [0] NCCL INFO NET/OFI Using Libfabric version 2.6\n" +
		"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" +
		"h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" +
		"h:1:1 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" +
		"h:1:1 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
	r, err := ParseString(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)",
		"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 2 nics)",
		"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 3 nics)",
		"h:1:1 [0] NCCL INFO NET/OFI Using Libfabric version 2.6",
	}
	if !reflect.DeepEqual(r.Transport.Lines, want) {
		t.Errorf("Lines = %q\nwant %q", r.Transport.Lines, want)
	}
	if len(r.Transport.DataLines) != maxPerKind {
		t.Errorf("DataLines = %q, want %d channel lines", r.Transport.DataLines, maxPerKind)
	}
	if got := providerString(r.Transport.Providers); got != "efa/1,efa/2,efa/3,efa/4" {
		t.Errorf("Providers = %s", got)
	}
}
