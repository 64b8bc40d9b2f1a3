/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - what the parts of leaseholdctl share: exit codes, the control
 * message types, the widest table cell.
 */
#ifndef LH_CTL_H
#define LH_CTL_H

#include "proto/control.pb-c.h"

#define EXIT_OK 0
#define EXIT_NOTOK 1
#define EXIT_ERR 2
/* the daemon could not be asked; each reason its own code (see --help) */
#define EXIT_NO_SOCKET 3
#define EXIT_STALE 4
#define EXIT_DENIED 5
#define EXIT_REFUSED 6
#define EXIT_TIMEOUT 7

#define CELL 512 /* widest table cell, bytes (-o wide shows a cell up to this) */

typedef Leasehold__Control__Response Response;
typedef Leasehold__Control__Plugin Plugin;
typedef Leasehold__Control__Member Member;
typedef Leasehold__Control__RoleEntry RoleEntry;

#endif
