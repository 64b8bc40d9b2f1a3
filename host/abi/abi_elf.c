/* SPDX-License-Identifier: MIT */
/*
 * abi_elf.c - see abi_elf.h. Every read goes through abi_elf_fits() first.
 */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "abi/abi_elf.h"

#if UINTPTR_MAX == 0xffffffffffffffffu
#define ELF_HOST_CLASS ELFCLASS64
typedef Elf64_Ehdr elf_ehdr;
typedef Elf64_Shdr elf_shdr;
typedef Elf64_Sym elf_sym;
#else
#define ELF_HOST_CLASS ELFCLASS32
typedef Elf32_Ehdr elf_ehdr;
typedef Elf32_Shdr elf_shdr;
typedef Elf32_Sym elf_sym;
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ELF_HOST_DATA ELFDATA2LSB
#else
#define ELF_HOST_DATA ELFDATA2MSB
#endif

/* [off, off+len) lies inside a buffer of size bytes (no overflow) */
static bool abi_elf_fits(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* section i's header (copied: buf need not be aligned) */
static int abi_elf_section(const uint8_t *buf, size_t size, const elf_ehdr *eh, uint64_t i,
		       elf_shdr *ret)
{
	if (i >= eh->e_shnum)
		return -ENOEXEC;
	uint64_t off = (uint64_t)eh->e_shoff + i * sizeof(elf_shdr);
	if (!abi_elf_fits(off, sizeof(elf_shdr), size))
		return -ENOEXEC;
	memcpy(ret, buf + off, sizeof(*ret));
	return 0;
}

/* look for name among the symbols of symtab section st */
static int abi_elf_scan_symtab(const uint8_t *buf, size_t size, const elf_ehdr *eh,
			   const elf_shdr *st, const char *name, size_t name_len)
{
	elf_shdr strs;
	if (st->sh_entsize != sizeof(elf_sym) || !abi_elf_fits(st->sh_offset, st->sh_size, size))
		return -ENOEXEC;
	if (abi_elf_section(buf, size, eh, st->sh_link, &strs) < 0 || strs.sh_type != SHT_STRTAB ||
	    !abi_elf_fits(strs.sh_offset, strs.sh_size, size))
		return -ENOEXEC;
	const uint8_t *names = buf + strs.sh_offset;
	uint64_t n = st->sh_size / sizeof(elf_sym);
	for (uint64_t k = 0; k < n; k++) {
		elf_sym sym;
		memcpy(&sym, buf + st->sh_offset + k * sizeof(sym), sizeof(sym));
		if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strs.sh_size)
			continue;
		/* the name and its NUL lie inside the string table */
		if (strs.sh_size - sym.st_name <= name_len)
			continue;
		if (memcmp(names + sym.st_name, name, name_len) == 0 &&
		    names[sym.st_name + name_len] == 0)
			return 1;
	}
	return 0;
}

int abi_elf_symtab_defines(const uint8_t *buf, size_t size, const char *name)
{
	if (!name || !*name)
		return -EINVAL;
	if (!buf || size < sizeof(elf_ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0 ||
	    buf[EI_CLASS] != ELF_HOST_CLASS || buf[EI_DATA] != ELF_HOST_DATA)
		return -ENOEXEC;
	elf_ehdr eh;
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_shnum == 0)
		return 0;
	if (eh.e_shentsize != sizeof(elf_shdr) ||
	    !abi_elf_fits(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(elf_shdr), size))
		return -ENOEXEC;
	size_t name_len = strlen(name);
	for (uint64_t i = 0; i < eh.e_shnum; i++) {
		elf_shdr sh;
		if (abi_elf_section(buf, size, &eh, i, &sh) < 0)
			return -ENOEXEC;
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		int r = abi_elf_scan_symtab(buf, size, &eh, &sh, name, name_len);
		if (r != 0)
			return r;
	}
	return 0;
}
