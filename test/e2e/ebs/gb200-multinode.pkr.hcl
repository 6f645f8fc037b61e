# Two GB200 trays of one NVLink domain (issue 35; gb200multinode_test.go), as
# examples/gb200-slurm bakes them: a tray exists only inside an UltraServer Capacity Block
# (amazon-ebs cannot launch into one: it sets no capacity-block market type), so amazon-ebs
# bakes the arm64 DLAMI on a Graviton c8g.8xlarge with defer_validation (a layer creates IMEX
# channel 0 at boot, as gb200-healthy does), then one dlami post-processor sequence per
# scenario launches 2 trays into the block (capacity_reservation_id, market_type =
# "capacity-block") and completes the validation there: each tray's first boot and host suite
# on its own, then the all-reduce across them twice, over EFA with
# NCCL_MNNVL_ENABLE=0 (nccl-multinode) and with NCCL_MNNVL_ENABLE=1 (nccl-mnnvl):
#   - healthy: both trays in the simulated default clique; both checks pass.
#   - split: the test puts tray 2's GPUs in another clique once it runs (a tray of another
#     UltraServer): NCCL goes on over EFA, nccl-mnnvl fails naming tray 2, nccl-multinode
#     still passes.
#   - imex: the test makes tray 2's nvidia-imex fail whenever it restarts: the IMEX domain
#     across the trays never forms, imex-domain fails naming tray 2, the run over MNNVL does
#     not start, nccl-multinode still passes.
# Between the two runs the verification forms the IMEX domain across the trays (imex-domain).
# The bake also installs the node check (node_check, as the example does): the plugin picks
# linux/arm64 for the aarch64 host, the trays run it at boot (through qemu-aarch64 on this
# x86_64 machine: test/simhost/install-deps), and the test boots one more tray from the AMI
# whose fabric degrades (gb200multinode_test.go).
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
  architecture        = "arm64"
  instance_type       = "p6e-gb200.36xlarge"
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "gb200" {
  region                     = var.region
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "c8g.8xlarge"
  ssh_username  = "ubuntu"
  ssh_timeout   = "5m"
  ami_name      = "gb200-multinode-${formatdate("YYYYMMDDhhmmss", timestamp())}"
}

build {
  name    = "gb200-multinode"
  sources = ["source.amazon-ebs.gb200"]

  provisioner "dlami" {
    report_dir       = var.report_dir
    defer_validation = true
    layer {
      name   = "imex-channel0"
      inline = ["mkdir -p /etc/modprobe.d", "echo 'options nvidia NVreg_CreateImexChannel0=1' >/etc/modprobe.d/nvidia-imex-channel0.conf"]
    }
    node_check {
      action  = "block"
      before  = ["slurmd.service"]
      timeout = "2m"
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/healthy"
    instance_type       = "p6e-gb200.36xlarge"
    complete_validation = true
    # The UltraServer's Capacity Block (the fake takes any well-formed id).
    capacity_reservation_id = "cr-0123456789abcdef0"
    market_type             = "capacity-block"
    nodes                   = 2
    efa                     = "4" # EKS's example layout (grace-blackwell.md 1.1)
    nccl                    = false
    ssh_timeout             = "5m"
    settle_timeout          = "5m"
    on_failure              = "keep"
    run_tags                = { "dlami:scenario" = "healthy" }
    multi_node {
      timeout          = "2m"
      busbw_floor_gbps = 100 # no public 2-node GB200 figure (grace-blackwell.md 1.1); the simulated tray's is 180
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/split"
    instance_type       = "p6e-gb200.36xlarge"
    complete_validation = true
    # The UltraServer's Capacity Block (the fake takes any well-formed id).
    capacity_reservation_id = "cr-0123456789abcdef0"
    market_type             = "capacity-block"
    nodes                   = 2
    efa                     = "4" # EKS's example layout (grace-blackwell.md 1.1)
    nccl                    = false
    ssh_timeout             = "5m"
    settle_timeout          = "5m"
    on_failure              = "keep"
    run_tags                = { "dlami:scenario" = "split" }
    multi_node {
      timeout          = "2m"
      busbw_floor_gbps = 100 # no public 2-node GB200 figure (grace-blackwell.md 1.1); the simulated tray's is 180
    }
  }

  post-processor "dlami" {
    region              = var.region
    custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
    sts_endpoint        = var.aws_endpoint # fake endpoint
    bom_file            = "${var.report_dir}/dlami-bom.json"
    report_dir          = "${var.report_dir}/imex"
    instance_type       = "p6e-gb200.36xlarge"
    complete_validation = true
    # The UltraServer's Capacity Block (the fake takes any well-formed id).
    capacity_reservation_id = "cr-0123456789abcdef0"
    market_type             = "capacity-block"
    nodes                   = 2
    efa                     = "4" # EKS's example layout (grace-blackwell.md 1.1)
    nccl                    = false
    ssh_timeout             = "5m"
    settle_timeout          = "5m"
    on_failure              = "keep"
    run_tags                = { "dlami:scenario" = "imex" }
    multi_node {
      timeout          = "2m"
      busbw_floor_gbps = 100 # no public 2-node GB200 figure (grace-blackwell.md 1.1); the simulated tray's is 180
    }
  }
}
