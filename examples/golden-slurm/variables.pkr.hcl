variable "region" {
  type        = string
  description = "Region the build instance runs in and the DLAMI is resolved in."
  default     = "us-east-1"
}

variable "instance_type" {
  type        = string
  description = "Build instance type; validation expectations (GPUs, EFA, busbw floor) follow its profile."
  default     = "p6-b200.48xlarge"
  validation {
    condition     = contains(["p6-b200.48xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"], var.instance_type)
    error_message = "The instance_type must be one of p6-b200.48xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge."
  }
}

variable "subnet_id" {
  type        = string
  description = "Subnet (in an AZ with capacity for instance_type) for the build instance; null lets AWS choose."
  default     = null
}

variable "ami_regions" {
  type        = list(string)
  description = "Regions the finished AMI is copied to."
  default     = ["us-west-2"]
}

variable "root_volume_gb" {
  type    = number
  default = 200
}

variable "report_dir" {
  type        = string
  description = "Where dlami-report.{json,junit.xml,md} are written."
  default     = "dlami-reports/golden-slurm"
}

variable "enroot_version" {
  type    = string
  default = "3.5.0"
}

variable "pyxis_version" {
  type    = string
  default = "0.20.0"
}

variable "dlami_build" {
  type        = string
  description = "DLAMI build (YYYYMMDD, the date at the end of its name) to bake on: the build whose kernel and driver expect_kernel and expect_nvidia_driver name. Move the three together, after reviewing the DLAMI release notes."
  default     = "20261002"
}

variable "expect_kernel" {
  type        = string
  description = "Kernel of the DLAMI build you validated (uname -r)."
  default     = "7.0.0-1014-aws"
}

variable "expect_nvidia_driver" {
  type        = string
  description = "NVIDIA driver of the DLAMI build you validated."
  default     = "595.91.07"
}
