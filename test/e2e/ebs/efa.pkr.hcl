# EFA where AWS can give it (issue 25; efa_test.go): amazon-ebs bakes on p6-b200.48xlarge with
# its one plain network interface, so the bake's EFA device checks warn "not attached at
# launch". Then one dlami post-processor sequence per scenario verifies the same AMI (Packer
# runs the sequences in order, and a failed one does not stop the next):
#   - p5: efa = "all" on p5.48xlarge in a temporary cluster placement group: the User Guide's
#     P5 layout (32 EFA), reached through a temporary Elastic IP; efa-devices, efa-traffic and
#     gpudirect-rdma pass.
#   - user-group: security_group_ids = a group whose rules lack the outbound rule to itself:
#     refused before anything is launched, naming the rule.
#   - bastion: p6-b200.48xlarge (8 EFA), no public address, reached at its private address
#     through a bastion (a second simulated host running real sshd).
#   - revoked: p6-b200.48xlarge with nccl = false; the test revokes the temporary group's
#     inbound rule from itself while the verification runs: efa-traffic fails within its bound
#     (efa_traffic.timeout), naming the group.
# Differs from a user's template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type = string
}

variable "report_dir" {
  type = string
}

variable "user_group" {
  type        = string
  description = "A security group without the outbound rule to itself (made by the test)."
}

variable "bastion_host" {
  type = string
}

variable "bastion_key" {
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

source "amazon-ebs" "efa" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p6-b200.48xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "efa-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  name    = "efa"
  sources = ["source.amazon-ebs.efa"]

  provisioner "dlami" {
    report_dir = var.report_dir
    # Floors, so that the verifications judge the figures (without one they warn); the
    # stand-ins' figures are 4567 MB/s per device and 45 GB/s for the forced-network run.
    efa_traffic {
      min_bandwidth_mbps = 2000
      timeout            = "15s"
    }
    gpudirect_rdma {
      busbw_floor_gbps = 30
    }
  }

  post-processor "dlami" {
    region                    = var.region
    custom_endpoint_ec2       = var.aws_endpoint # fake endpoint
    sts_endpoint              = var.aws_endpoint # fake endpoint
    bom_file                  = "${var.report_dir}/dlami-bom.json"
    report_dir                = "${var.report_dir}/p5"
    instance_type             = "p5.48xlarge"
    efa                       = "all"
    temporary_placement_group = true
    ssh_timeout               = "5m"
    settle_timeout            = "5m"
    on_failure                = "keep"
    run_tags                  = { "dlami:scenario" = "p5" }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/user-group"
    instance_type       = "p6-b200.48xlarge"
    security_group_ids  = [var.user_group]
    on_failure          = "keep"
    run_tags            = { "dlami:scenario" = "user-group" }
  }

  post-processor "dlami" {
    region                       = var.region
    custom_endpoint_ec2          = var.aws_endpoint # fake endpoint
    sts_endpoint                 = var.aws_endpoint # fake endpoint
    bom_file                     = "${var.report_dir}/dlami-bom.json"
    report_dir                   = "${var.report_dir}/bastion"
    instance_type                = "p6-b200.48xlarge"
    associate_public_ip_address  = false
    ssh_bastion_host             = var.bastion_host
    ssh_bastion_username         = "ubuntu"
    ssh_bastion_private_key_file = var.bastion_key
    ssh_timeout                  = "5m"
    settle_timeout               = "5m"
    on_failure                   = "keep"
    run_tags                     = { "dlami:scenario" = "bastion" }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/revoked"
    instance_type       = "p6-b200.48xlarge"
    nccl                = false
    ssh_timeout         = "5m"
    settle_timeout      = "5m"
    on_failure          = "keep"
    run_tags            = { "dlami:scenario" = "revoked" }
  }
}
