# The template of the scheduled rebake (rebake.yml). One golden AMI family per region and
# instance type; the data source finds the newest golden AMI of the family and compares the
# DLAMI it was baked from (its dlami:source_ami tag) with the DLAMI AWS publishes today.
#
#   packer init .
#   packer build -only='decide.*' -var region=us-east-1 .    # writes rebake-decision.json
#   packer build -only='rebake.*' -var region=us-east-1 -var instance_type=p5.48xlarge .

packer {
  required_version = ">= 1.16.0"
  required_plugins {
    dlami = {
      source  = "github.com/dlami-bake/dlami"
      version = ">= 0.1.0"
    }
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.8.0"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "instance_type" {
  type    = string
  default = "p6-b200.48xlarge"
}

variable "subnet_id" {
  type    = string
  default = null
}

variable "run_id" {
  type        = string
  description = "The CI run this bake belongs to (rebake.yml: run id, attempt, region and instance type). Every resource the bake creates is tagged dlami:ci_run = run_id, so that a cancelled job's cleanup finds what Packer could not delete."
  default     = "local"
}

variable "report_dir" {
  type    = string
  default = "dlami-reports/rebake"
}

variable "previous_bom_file" {
  type        = string
  description = "The dlami-bom.json of the previous rebake (rebake.yml downloads it from the last successful run's artifact): the reports then say what changed since (kernel, driver, CUDA, NCCL, EFA, toolkit, packages). Null: no comparison."
  default     = null
}

locals {
  # The family the rebake decision is about: one per region and instance type.
  family = "golden-${replace(var.instance_type, ".", "-")}"
  # On the build instance, its volumes, the temporary key pairs and security groups, the AMI's
  # snapshots and the post-processor's verification instance: what the workflow's cleanup step
  # looks for when the job was cancelled or timed out.
  ci_run_tags = { "dlami:ci_run" = var.run_id }
}

data "dlami" "base" {
  region = var.region

  # Newest AMI owned by this account, tagged with this family and dlami:verified = true (the
  # post-processor below verified its first boot): its dlami:source_ami tag says which DLAMI it
  # was baked from. No verified golden AMI yet, or an older source: rebake_needed = true.
  golden {
    name_prefix = "${local.family}-"
    tags        = { "dlami:family" = local.family }
  }
}

variable "decision_file" {
  type        = string
  description = "Where the `decide` build writes the rebake decision (JSON)."
  default     = "rebake-decision.json"
}

# What the scheduled job needs to decide, from the data source's rebake outputs.
locals {
  decision = {
    rebake_needed  = data.dlami.base.rebake_needed
    rebake_regions = data.dlami.base.rebake_regions
    region         = data.dlami.base.region
    base_ami_id    = data.dlami.base.ami_id
    base_ami_name  = data.dlami.base.name
    base_build     = data.dlami.base.build
    golden_ami_id  = data.dlami.base.golden_ami_id
    golden_source  = data.dlami.base.golden_source_ami
  }
}

# The `decide` build only runs the data source and writes the decision: no instance, no cost.
#   packer build -only='decide.*' .
# (`packer console` cannot be used for this with Packer 1.16: it does not load installed
# plugins, so it cannot run a plugin's data source.)
source "null" "decide" {
  communicator = "none"
}

build {
  name    = "decide"
  sources = ["source.null.decide"]

  provisioner "shell-local" {
    environment_vars = ["DECISION_FILE=${var.decision_file}"]
    # A quoted here-document: the JSON reaches the file without shell expansion.
    inline = [
      "cat > \"$DECISION_FILE\" <<'DECISION_JSON'\n${jsonencode(local.decision)}\nDECISION_JSON",
      "cat \"$DECISION_FILE\"",
    ]
  }
}

source "amazon-ebs" "golden" {
  region        = var.region
  source_ami    = data.dlami.base.ami_id
  instance_type = var.instance_type
  subnet_id     = var.subnet_id
  ssh_username  = "ubuntu"
  ssh_timeout   = "30m"
  # No data source output in the name: `packer validate` sees those as "<unknown>". Seconds:
  # a forced re-run within the same minute would otherwise collide (InvalidAMIName.Duplicate).
  ami_name = "${local.family}-${formatdate("YYYYMMDDhhmmss", timestamp())}"

  launch_block_device_mappings {
    device_name           = data.dlami.base.root_device_name
    volume_size           = 200
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags = {
    "dlami:family"     = local.family
    "dlami:source_ami" = data.dlami.base.ami_id
    "dlami:build"      = data.dlami.base.build
    "dlami:previous"   = data.dlami.base.golden_ami_id
  }
  # run_tags also tag amazon-ebs's temporary key pair and security group.
  run_tags        = local.ci_run_tags
  run_volume_tags = local.ci_run_tags
  snapshot_tags   = local.ci_run_tags
}

build {
  name    = "rebake"
  sources = ["source.amazon-ebs.golden"]

  provisioner "dlami" {
    report_dir        = var.report_dir
    instance_type     = var.instance_type
    previous_bom_file = var.previous_bom_file

    layer {
      name         = "slurm"
      apt_packages = ["slurmd", "slurm-client", "munge"]
      inline       = ["systemctl enable munge", "systemctl disable slurmd"]
    }
  }

  # The new AMI's first boot: only an AMI tagged dlami:verified = true should reach the fleet's
  # launch templates; one whose first boot differs from the bake is deregistered.
  post-processor "dlami" {
    region         = var.region
    instance_type  = var.instance_type
    subnet_id      = var.subnet_id
    bom_file       = "${var.report_dir}/dlami-bom.json"
    report_dir     = "${var.report_dir}/first-boot"
    on_failure     = "deregister"
    settle_timeout = "20m"
    run_tags       = local.ci_run_tags
  }

  # A sequence of its own that keeps the AMI when the post-processor fails: Packer destroys a
  # build's AMI after any failed post-processor unless another sequence kept it, and a first
  # boot that could not be judged (capacity, SSH, credentials) says nothing against the image.
  # A judged failure is deregistered by on_failure above; an unjudged AMI stays registered
  # without dlami:verified, so the decide build does not count it and the next run rebakes.
  post-processor "manifest" {
    output     = "${var.report_dir}/packer-manifest.json"
    strip_path = true
  }
}
