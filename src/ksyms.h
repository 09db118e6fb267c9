/* SPDX-License-Identifier: GPL-2.0 */
#ifndef UD_KSYMS_H
#define UD_KSYMS_H

int ud_ksyms_init(void);
void *ud_ksym(const char *name);

#endif
