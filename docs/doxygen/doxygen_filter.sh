#!/bin/sh
# Doxygen input filter for the public headers: a comment line before a declaration (// or /*)
# becomes a documentation comment (/// or /**), a comment after one on the same line (// text)
# a member comment (///< text). Banner lines of the form "// ---- x ----" stay plain.
exec sed -e '/^[[:space:]]*\/\/ *----/b' \
  -e 's|^\([[:space:]]*\)// |\1/// |' -e 's|^\([[:space:]]*\)//$|\1///|' \
  -e 's|^\([[:space:]]*\)/\* |\1/** |' \
  -e 's|\([;,]\)[[:space:]]*// \(.*\)$|\1 ///< \2|' -e 's|\([;,]\)[[:space:]]*/\* \(.*\)\*/$|\1 /**< \2*/|' "$1"
