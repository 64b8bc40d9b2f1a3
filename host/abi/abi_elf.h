/* SPDX-License-Identifier: MIT */
/*
 * abi_elf.h - read a plugin file's static symbol table (.symtab), to tell
 * "the descriptor is there but hidden" from "there is no descriptor" when
 * dlsym() finds nothing.
 *
 * The bytes are outside input (any file in a plugin directory): every
 * offset, size and count is checked against the buffer before it is read,
 * and a malformed table is an answer (-ENOEXEC), never a read outside buf.
 * A stripped file has no .symtab: the answer is then "not defined".
 * Only ELF files of the host's class and byte order are read.
 * Thread-safety: none needed (pure function of its arguments).
 */
#ifndef LH_ABI_ELF_H
#define LH_ABI_ELF_H

#include <stddef.h>
#include <stdint.h>

/* abi_elf_symtab_defines - whether buf[size], an ELF image, defines a symbol
 * called name (any binding or visibility, not undefined) in a .symtab
 * section. Returns 1 (defined), 0 (not defined, or no .symtab), -ENOEXEC
 * (not an ELF image of the host's class and byte order, or its section or
 * symbol tables do not fit the buffer) or -EINVAL (name NULL or empty).
 * buf is borrowed for the call only. */
int abi_elf_symtab_defines(const uint8_t *buf, size_t size, const char *name);

#endif
