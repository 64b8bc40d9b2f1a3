# LH_CHECK_CFLAG(FLAG, VAR): append FLAG to VAR when the C compiler accepts it
# (with -Werror, so a flag that only warns is not taken).
AC_DEFUN([LH_CHECK_CFLAG], [
  AC_MSG_CHECKING([whether $CC accepts $1])
  lh_save_CFLAGS="$CFLAGS"
  CFLAGS="$CFLAGS -Werror $1"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
    [AC_MSG_RESULT([yes]); $2="$$2 $1"],
    [AC_MSG_RESULT([no])])
  CFLAGS="$lh_save_CFLAGS"
])
