# Two nodes over the fabric (issue 26; multinode_test.go): amazon-ebs bakes on p5.48xlarge, then
# one dlami post-processor sequence per scenario verifies the same AMI on 2 × p5 from one
# RunInstances, each node's first boot on its own, then the NCCL all-reduce across them over
# real SSH between the simulated hosts (Packer runs the sequences in order; a failed one does
# not stop the next):
#   - no-efa: instance_types p5.48xlarge, then p5e.48xlarge; the test makes the fake refuse the
#     first for capacity (the fleet falls through to p5e, never to a smaller test) and launch
#     the second node of the fleet without EFA: it falls back to sockets and the test fails
#     naming it.
#   - healthy: every check of both nodes and the test across them pass; the AMI is tagged
#     dlami:verified_nodes = 2.
#   - stall: the test revokes the temporary group's rule from itself once the nodes run: the
#     collective stalls, fails at multi_node.timeout naming the group, and every rank on both
#     nodes is stopped.
#   - xid: the second node logs an Xid while the test runs: it fails naming that node.
# Differs from a user's template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type = string
}

variable "report_dir" {
  type = string
}

variable "region" {
  type    = string
  default = "us-east-1"
}

data "dlami" "base" {
  region              = var.region
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "multinode" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p5.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "multinode-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  name    = "multinode"
  sources = ["source.amazon-ebs.multinode"]

  provisioner "dlami" {
    report_dir = var.report_dir
    efa_traffic {
      min_bandwidth_mbps = 2000
      timeout            = "15s"
    }
    gpudirect_rdma {
      busbw_floor_gbps = 30
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/no-efa"
    instance_types      = ["p5.48xlarge", "p5e.48xlarge"]
    nodes               = 2
    nccl                = false
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
    on_failure          = "keep"
    run_tags            = { "dlami:scenario" = "no-efa" }
    multi_node {
      timeout = "2m"
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/healthy"
    instance_type       = "p5.48xlarge"
    nodes               = 2
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
    on_failure          = "keep"
    run_tags            = { "dlami:scenario" = "healthy" }
    multi_node {
      timeout = "2m"
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/stall"
    instance_type       = "p5.48xlarge"
    nodes               = 2
    nccl                = false
    skip_checks         = ["efa-traffic"]
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
    on_failure          = "keep"
    run_tags            = { "dlami:scenario" = "stall" }
    multi_node {
      timeout = "15s"
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/xid"
    instance_type       = "p5.48xlarge"
    nodes               = 2
    nccl                = false
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
    on_failure          = "keep"
    run_tags            = { "dlami:scenario" = "xid" }
    multi_node {
      timeout = "2m"
    }
  }
}
