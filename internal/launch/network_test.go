package launch

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// SelfTrafficRules names the rule the groups of an EFA launch lack: an inbound and an outbound
// rule of protocol -1 naming one of the groups. Rules of another protocol, naming a group not
// in the launch, or to 0.0.0.0/0 do not carry EFA; with several groups, a rule in one naming
// another counts, and the commands name the first group.
func TestSelfTrafficRules(t *testing.T) {
	all := func(groups ...string) []types.IpPermission {
		var pairs []types.UserIdGroupPair
		for _, g := range groups {
			pairs = append(pairs, types.UserIdGroupPair{GroupId: aws.String(g)})
		}
		return []types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: pairs}}
	}
	group := func(id string, in, out []types.IpPermission) types.SecurityGroup {
		return types.SecurityGroup{GroupId: aws.String(id), IpPermissions: in, IpPermissionsEgress: out}
	}
	tcpSelf := []types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(0), ToPort: aws.Int32(65535), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String("sg-a")}}}}
	anywhere := []types.IpPermission{{IpProtocol: aws.String("-1"), IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}}}
	const (
		inbound  = "an inbound rule allowing all traffic (protocol -1, all ports) from the group itself"
		outbound = "an outbound rule allowing all traffic (protocol -1, all ports) to the group itself"
	)
	for _, tc := range []struct {
		name      string
		described []types.SecurityGroup
		groups    []string
		// want are the texts the error holds (none: no error); not those it must not.
		want, not []string
	}{
		{"both self rules", []types.SecurityGroup{group("sg-a", all("sg-a"), all("sg-a"))}, []string{"sg-a"}, nil, nil},
		{"inbound missing", []types.SecurityGroup{group("sg-a", anywhere, all("sg-a"))}, []string{"sg-a"},
			[]string{"security_group_ids sg-a:", inbound, "aws ec2 authorize-security-group-ingress --group-id sg-a --ip-permissions 'IpProtocol=-1,UserIdGroupPairs=[{GroupId=sg-a}]'"}, []string{outbound}},
		{"outbound only to 0.0.0.0/0", []types.SecurityGroup{group("sg-a", all("sg-a"), anywhere)}, []string{"sg-a"},
			[]string{outbound, "authorize-security-group-egress --group-id sg-a"}, []string{inbound}},
		{"both missing", []types.SecurityGroup{group("sg-a", nil, nil)}, []string{"sg-a"}, []string{inbound + ": aws ec2", ", and " + outbound}, nil},
		{"tcp to itself is not all traffic", []types.SecurityGroup{group("sg-a", tcpSelf, all("sg-a"))}, []string{"sg-a"}, []string{inbound}, []string{outbound}},
		{"a rule naming a group outside the launch", []types.SecurityGroup{group("sg-a", all("sg-z"), all("sg-a"))}, []string{"sg-a"}, []string{inbound}, nil},
		{"several groups: each names the other", []types.SecurityGroup{group("sg-a", all("sg-b"), nil), group("sg-b", nil, all("sg-a"))}, []string{"sg-a", "sg-b"}, nil, nil},
		{"several groups: no outbound among them", []types.SecurityGroup{group("sg-a", all("sg-a"), anywhere), group("sg-b", nil, anywhere)}, []string{"sg-a", "sg-b"},
			[]string{"security_group_ids sg-a, sg-b:", outbound, "--group-id sg-a --ip-permissions 'IpProtocol=-1,UserIdGroupPairs=[{GroupId=sg-a}]'"}, []string{inbound, "--group-id sg-b"}},
		{"several groups: the rules on the second", []types.SecurityGroup{group("sg-a", nil, nil), group("sg-b", all("sg-b"), all("sg-b"))}, []string{"sg-a", "sg-b"}, nil, nil},
		{"no group", nil, nil, []string{"no security group"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SelfTrafficRules(tc.described, tc.groups)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("%q names %q", err, n)
				}
			}
		})
	}
}
