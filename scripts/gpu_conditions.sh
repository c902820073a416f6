# Sourced by the gpu_*.sh scripts: the one table of the conditions a GPU call names, and the lent GPU's name.
# condition_args CONDITION sets the array `args` to the flags `calibrate`, `survey` and `profile` take for it, or
# returns 1 for a name it does not know. CONDITION and its flags:
#   fp16         fp16, channels_last, cuDNN as `profile` sets it by default
#   fp16_nchw    fp16, NCHW
#   amp          timm's condition: fp32 weights under autocast, NCHW
#   amp_nhwc     fp32 weights under autocast, channels_last (most deployment code)
#   bf16         bf16, channels_last
#   amp_bf16     fp32 weights under bf16 autocast, channels_last
#   fp32         fp32 tensors as PyTorch runs them by default (cuDNN convolutions in TF32), channels_last
#   fp32_strict  fp32, no TF32 anywhere, channels_last
#   tf32         fp32 tensors, TF32 in convolutions and matmuls, channels_last
#   fp32_nchw, fp32_strict_nchw, tf32_nchw, amp_bf16_nchw: the same on NCHW tensors (how most PyTorch code and
#                NVIDIA's DeepLearningExamples run fp32 and TF32)
CONDITIONS="fp16|fp16_nchw|amp|amp_nhwc|bf16|amp_bf16|fp32|fp32_strict|tf32 (each but amp also _nchw)"
condition_args() {
  case $1 in
    fp16) args=() ;;
    fp16_nchw) args=(--no-channels-last) ;;
    amp) args=(--precision amp --no-channels-last) ;;
    amp_nhwc) args=(--precision amp) ;;
    bf16 | amp_bf16 | fp32 | fp32_strict | tf32) args=(--precision "$1") ;;
    bf16_nchw | amp_bf16_nchw | fp32_nchw | fp32_strict_nchw | tf32_nchw) args=(--precision "${1%_nchw}" --no-channels-last) ;;
    *) return 1 ;;
  esac
}
# lent_gpu: the lent GPU's short name, as profiles, stores and logs are named by it: the first word after "NVIDIA"
# in nvidia-smi's name of the first GPU, lowercase (h100, h200).
lent_gpu() {
  nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | awk '{print tolower($2)}'
}
# packed_out NAME: every file under $OUT not yet packed, packed into one, $OUT/NAME-HHMMSS.tgz, and removed. The
# lender brings back at most 8 files, 2 folders down: a call that runs several scripts, or a script that writes a
# file per model or per condition, loses the rest unless they are packed. Unpack with `tar xzf PACK` in a folder of
# its own, then copy the files where the script's header says. The gpu_*.sh scripts call it last.
packed_out() {
  local pack files
  pack=$1-$(date -u +%H%M%S).tgz
  files=$(cd "$OUT" && find . -type f ! -name '*.tgz' ! -name '*.part' | sort)
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086  # the file names are the scripts' own: no spaces
  tar czf "$OUT/$pack.part" -C "$OUT" $files && mv "$OUT/$pack.part" "$OUT/$pack" && (cd "$OUT" && rm -f $files)
  find "$OUT" -mindepth 1 -type d -empty -delete
  echo "packed into \$OUT/$pack: $(echo "$files" | wc -l) files"
}
