package awsfake

// Operation names the fake serves.
const (
	OpGetParameter        = "GetParameter"
	OpGetParametersByPath = "GetParametersByPath"
	OpDescribeImages      = "DescribeImages"
	OpAssumeRole          = "AssumeRole"
	OpGetCallerIdentity   = "GetCallerIdentity"

	OpRunInstances                  = "RunInstances"
	OpDescribeInstances             = "DescribeInstances"
	OpStopInstances                 = "StopInstances"
	OpTerminateInstances            = "TerminateInstances"
	OpCreateKeyPair                 = "CreateKeyPair"
	OpDeleteKeyPair                 = "DeleteKeyPair"
	OpDescribeKeyPairs              = "DescribeKeyPairs"
	OpCreateSecurityGroup           = "CreateSecurityGroup"
	OpAuthorizeSecurityGroupIngress = "AuthorizeSecurityGroupIngress"
	OpDescribeSecurityGroups        = "DescribeSecurityGroups"
	OpDeleteSecurityGroup           = "DeleteSecurityGroup"
	OpDescribeVpcs                  = "DescribeVpcs"
	OpDescribeSubnets               = "DescribeSubnets"
	OpDescribeRegions               = "DescribeRegions"
	OpDescribeInstanceTypeOfferings = "DescribeInstanceTypeOfferings"
	OpCreateTags                    = "CreateTags"
	OpDescribeTags                  = "DescribeTags"
	OpCreateImage                   = "CreateImage"
	OpCopyImage                     = "CopyImage"
	OpDeregisterImage               = "DeregisterImage"
	OpModifyImageAttribute          = "ModifyImageAttribute"
	OpEnableImageDeprecation        = "EnableImageDeprecation"
	OpDescribeSnapshots             = "DescribeSnapshots"
	OpDeleteSnapshot                = "DeleteSnapshot"
	OpModifySnapshotAttribute       = "ModifySnapshotAttribute"
	OpDescribeVolumes               = "DescribeVolumes"
	OpDeleteVolume                  = "DeleteVolume"

	OpDescribeInstanceTypes        = "DescribeInstanceTypes"
	OpDescribeNetworkInterfaces    = "DescribeNetworkInterfaces"
	OpDeleteNetworkInterface       = "DeleteNetworkInterface"
	OpAuthorizeSecurityGroupEgress = "AuthorizeSecurityGroupEgress"
	OpRevokeSecurityGroupIngress   = "RevokeSecurityGroupIngress"
	OpRevokeSecurityGroupEgress    = "RevokeSecurityGroupEgress"
	OpCreatePlacementGroup         = "CreatePlacementGroup"
	OpDescribePlacementGroups      = "DescribePlacementGroups"
	OpDeletePlacementGroup         = "DeletePlacementGroup"
	OpAllocateAddress              = "AllocateAddress"
	OpAssociateAddress             = "AssociateAddress"
	OpDisassociateAddress          = "DisassociateAddress"
	OpReleaseAddress               = "ReleaseAddress"
	OpDescribeAddresses            = "DescribeAddresses"

	// OpAny matches every operation in fault injection.
	OpAny = "*"
)

// ec2Ops lists the EC2 actions the fake answers, in the README's order.
func ec2Ops() []string {
	out := make([]string, 0, len(ec2Routes))
	for _, r := range ec2Routes {
		out = append(out, r.action)
	}
	return out
}

// OpNames lists every operation a fault may name, OpAny last.
func OpNames() []string {
	out := []string{OpGetParameter, OpGetParametersByPath, OpAssumeRole, OpGetCallerIdentity, OpGetProducts}
	out = append(out, ec2Ops()...)
	out = append(out, s3Ops()...)
	out = append(out, autoscalingOps()...)
	return append(out, OpAny)
}

func isKnownOp(op string) bool { return contains(OpNames(), op) }
